"""End-to-end HTTP tests: the real engine (SmolLM2-135M demo model, fp32 CPU) behind uvicorn.

Covered: OpenAI completions / chat (plain, streamed, usage, n=2 with seed + i), native /generate
(single, batch, streamed cumulative text), 16 concurrent greedy requests == each alone, client
disconnects (streamed and not) free the KV, 4xx for bad input with the server still serving,
--api-key, and the info / health / flush / metrics routes.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families


PROMPT = "The capital of France is"
CHAT = [{"role": "user", "content": "Name three colors."}]
TIMEOUT = 120
MAX_TOTAL_TOKENS = 4096  # as in conftest.py


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=TIMEOUT)


def post(server, path, payload, **kw):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {"content-type": "application/json", **kw.pop("headers", {})}
    return httpx.post(server.url + path, content=body, headers=headers,
                      timeout=kw.pop("timeout", TIMEOUT), **kw)


def sse(lines) -> list:
    """Events of an SSE stream (JSON objects, and the final "[DONE]")."""
    events = []
    for line in lines:
        if line.startswith("data: "):
            data = line[len("data: "):]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def generate(server, text, max_new=12, **sp):
    r = post(server, "/generate", {"text": text, "sampling_params":
                                   {"temperature": 0, "max_new_tokens": max_new, **sp}})
    assert r.status_code == 200, r.text
    return r.json()


# ---------------------------------------------------------------------------- OpenAI routes


def test_completions_plain_and_streamed(server, oai):
    tok = server.client.tokenizer
    r = oai.completions.create(model="default", prompt=PROMPT, max_tokens=12, temperature=0)
    assert r.object == "text_completion" and len(r.choices) == 1
    choice = r.choices[0]
    assert choice.finish_reason in ("length", "stop") and choice.text
    assert r.usage.prompt_tokens == len(tok.encode(PROMPT))
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert 0 < r.usage.completion_tokens <= 12
    native = generate(server, PROMPT, 12)
    assert native["text"] == choice.text
    assert native["meta_info"]["completion_tokens"] == r.usage.completion_tokens

    chunks = list(oai.completions.create(model="default", prompt=PROMPT, max_tokens=12,
                                         temperature=0, stream=True,
                                         stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == choice.text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == choice.finish_reason
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens


def test_chat_plain_and_streamed(server, oai):
    r = oai.chat.completions.create(model="default", messages=CHAT, max_tokens=16, temperature=0)
    assert r.object == "chat.completion"
    msg = r.choices[0].message
    assert msg.role == "assistant" and msg.content
    tok = server.client.tokenizer
    templated = tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    prompt_ids = tok.encode(templated, add_special_tokens=False)
    assert r.usage.prompt_tokens == len(prompt_ids)

    chunks = list(oai.chat.completions.create(model="default", messages=CHAT, max_tokens=16,
                                              temperature=0, stream=True,
                                              stream_options={"include_usage": True}))
    assert chunks[0].object == "chat.completion.chunk"
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == msg.content
    finals = [c.choices[0].finish_reason for c in chunks
              if c.choices and c.choices[0].finish_reason]
    assert finals == [r.choices[0].finish_reason]
    assert chunks[-1].usage.prompt_tokens == r.usage.prompt_tokens
    assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens


def test_stop_string_and_matched_stop(server):
    base = {"messages": CHAT, "max_tokens": 16, "temperature": 0}
    text = post(server, "/v1/chat/completions", base).json()["choices"][0]["message"]["content"]
    stop = text.split()[2]  # a word from the middle of the greedy answer
    r = post(server, "/v1/chat/completions", dict(base, stop=[stop]))
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["matched_stop"] == stop
    assert choice["message"]["content"] == text[:text.index(stop)]


def test_n2_greedy_and_seeded(server, oai):
    r = oai.completions.create(model="default", prompt=PROMPT, max_tokens=6, temperature=0, n=2)
    assert [c.index for c in r.choices] == [0, 1]
    assert r.choices[0].text == r.choices[1].text
    single = oai.completions.create(model="default", prompt=PROMPT, max_tokens=6, temperature=0)
    assert r.choices[0].text == single.choices[0].text
    assert r.usage.prompt_tokens == single.usage.prompt_tokens  # counted once per prompt
    assert r.usage.completion_tokens == 2 * single.usage.completion_tokens

    kw = dict(model="default", prompt=PROMPT, max_tokens=8, temperature=1.0)
    pair = oai.completions.create(n=2, seed=7, **kw)
    first = oai.completions.create(seed=7, **kw).choices[0].text
    second = oai.completions.create(seed=8, **kw).choices[0].text
    assert [c.text for c in pair.choices] == [first, second]


# ---------------------------------------------------------------------------- native /generate


def test_generate_single_batch_and_ids(server):
    one = generate(server, PROMPT, 8)
    assert set(one) >= {"text", "output_ids", "meta_info"}
    meta = one["meta_info"]
    assert meta["finish_reason"]["type"] in ("length", "stop")
    assert meta["prompt_tokens"] == len(server.client.tokenizer.encode(PROMPT))
    assert meta["completion_tokens"] == len(one["output_ids"]) and meta["cached_tokens"] == 0
    assert meta["e2e_latency"] > 0 and len(meta["id"]) == 32

    texts = [PROMPT, "def fibonacci(n):"]
    r = post(server, "/generate", {"text": texts, "sampling_params": {"temperature": 0,
                                                                       "max_new_tokens": 8}})
    batch = r.json()
    assert r.status_code == 200 and isinstance(batch, list) and len(batch) == 2
    assert batch[0]["text"] == one["text"] and batch[0]["output_ids"] == one["output_ids"]

    ids = server.client.tokenizer.encode(PROMPT)
    r = post(server, "/generate", {"input_ids": ids, "rid": "my-rid",
                                   "sampling_params": {"temperature": 0, "max_new_tokens": 8}})
    assert r.json()["output_ids"] == one["output_ids"] and r.json()["meta_info"]["id"] == "my-rid"


def test_generate_streamed_cumulative(server):
    one = generate(server, PROMPT, 10)
    payload = {"text": PROMPT, "stream": True,
               "sampling_params": {"temperature": 0, "max_new_tokens": 10}}
    with httpx.stream("POST", server.url + "/generate", json=payload, timeout=TIMEOUT) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse(r.iter_lines())
    assert events[-1] == "[DONE]" and len(events) > 2
    texts = [e["text"] for e in events[:-1]]
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:]))  # cumulative
    assert texts[-1] == one["text"] and events[-2]["output_ids"] == one["output_ids"]
    assert events[-2]["meta_info"]["finish_reason"] == one["meta_info"]["finish_reason"]

    payload = {"text": [PROMPT, "Hello"], "stream": True,
               "sampling_params": {"temperature": 0, "max_new_tokens": 4}}
    with httpx.stream("POST", server.url + "/generate", json=payload, timeout=TIMEOUT) as r:
        events = sse(r.iter_lines())
    assert events.count("[DONE]") == 1 and events[-1] == "[DONE]"
    last = {e["index"]: e for e in events[:-1]}
    assert sorted(last) == [0, 1] and last[0]["text"].startswith(one["text"][:5])
    assert all(e["meta_info"]["finish_reason"] is not None for e in last.values())


def test_concurrent_equals_alone(server, wait_idle):
    prompts = [f"Write a short sentence about the number {i}." for i in range(16)]
    sp = {"temperature": 0, "max_new_tokens": 16}
    alone = [generate(server, p, 16)["output_ids"] for p in prompts]

    async def run_all():
        async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT) as c:
            rs = await asyncio.gather(*[c.post("/generate", json={"text": p, "sampling_params": sp})
                                        for p in prompts])
        return [r.json()["output_ids"] for r in rs]

    together = asyncio.run(run_all())
    assert together == alone
    assert wait_idle(server.client)["kv_used_tokens"] == 0


# ---------------------------------------------------------------------------- disconnects


@pytest.mark.parametrize("path,payload", [
    ("/v1/chat/completions", {"messages": CHAT, "max_tokens": 2000, "ignore_eos": True,
                              "stream": True}),
    ("/generate", {"text": PROMPT, "stream": True,
                   "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}}),
])
def test_stream_disconnect_frees_kv(server, wait_idle, path, payload):
    with httpx.stream("POST", server.url + path, json=payload, timeout=TIMEOUT) as r:
        lines = r.iter_lines()
        head = [next(lines) for _ in range(6)]  # three events: "data: ..." and a blank line each
        running = server.client.stats()
    assert sum(line.startswith("data: ") for line in head) == 3
    assert running["num_running"] == 1 and running["kv_used_tokens"] > 0
    s = wait_idle(server.client, timeout=5)
    assert s["num_running"] == 0 and s["num_waiting"] == 0 and s["kv_used_tokens"] == 0
    assert s["kv_total_tokens"] == MAX_TOTAL_TOKENS


def test_nonstream_disconnect_frees_kv(server, wait_idle):
    payload = {"text": PROMPT, "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/generate", json=payload, timeout=1.0)
    s = wait_idle(server.client, timeout=5)
    assert s["num_running"] == 0 and s["kv_used_tokens"] == 0


# ---------------------------------------------------------------------------- bad input


MSG = [{"role": "user", "content": "hi"}]
BAD = [
    ("/v1/completions", b"{not json", 400),
    ("/v1/completions", b"[1, 2]", 400),
    ("/v1/completions", {"prompt": "hi", "max_tokens": "5"}, 400),
    ("/v1/completions", {"prompt": "hi", "temperature": -1}, 400),
    ("/v1/completions", {"prompt": "hi", "top_p": 0}, 400),
    ("/v1/completions", {"prompt": "hi", "top_p": 1.5}, 400),
    ("/v1/completions", {"prompt": [], "max_tokens": 4}, 400),
    ("/v1/completions", {"prompt": "", "max_tokens": 4}, 400),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 9000}, 400),
    ("/v1/completions", {"prompt": [1] * 8192, "max_tokens": 1}, 400),
    ("/v1/completions", {"prompt": [10 ** 9], "max_tokens": 1}, 400),
    ("/v1/completions", {"prompt": "hi", "logprobs": 2}, 400),
    ("/v1/completions", {"prompt": "hi", "logprobs": 0}, 400),
    ("/v1/completions", {"prompt": "hi", "logit_bias": {"7042": -100}}, 400),   # not ignored
    ("/v1/completions", {"prompt": "hi", "n": 0}, 400),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 0}, 400),
    ("/v1/completions", {"prompt": "hi", "top_k": 0}, 400),
    ("/v1/completions", {"model": "no-such-model", "prompt": "hi"}, 404),
    ("/v1/chat/completions", {"messages": []}, 400),
    ("/v1/chat/completions", {"messages": "hi"}, 400),
    ("/v1/chat/completions", {"messages": [{"content": "no role"}]}, 400),
    ("/v1/chat/completions", {"messages": MSG, "logprobs": True}, 400),
    ("/v1/chat/completions", {"messages": MSG, "logit_bias": {"7042": 100}}, 400),
    ("/v1/chat/completions", {"messages": MSG, "stream": "yes"}, 400),
    ("/v1/chat/completions", {"model": "no-such-model", "messages": MSG}, 404),
    ("/generate", {}, 400),
    ("/generate", {"text": []}, 400),
    ("/generate", {"text": "hi", "input_ids": [1]}, 400),
    ("/generate", {"text": "hi", "sampling_params": {"temperature": -0.5}}, 400),
    ("/generate", {"text": "hi", "sampling_params": {"no_such_param": 1}}, 400),
    ("/generate", {"text": ["a", "b"], "sampling_params": [{}]}, 400),
    ("/generate", {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 9000}}, 400),
    ("/generate", {"input_ids": [-1]}, 400),
]


def test_bad_inputs_get_4xx_and_server_keeps_serving(server, wait_idle):
    for path, payload, status in BAD:
        r = post(server, path, payload)
        assert r.status_code == status, (path, str(payload)[:200], r.text)
        err = r.json()["error"]
        assert err["message"] and err["type"] and err["code"] == status
    r = post(server, "/v1/completions", {"prompt": "hi", "max_tokens": 9000})
    assert "context length" in r.json()["error"]["message"]
    r = httpx.get(server.url + "/no/such/route")
    assert r.status_code == 404 and "error" in r.json()
    assert generate(server, PROMPT, 4)["meta_info"]["completion_tokens"] > 0
    assert wait_idle(server.client)["kv_used_tokens"] == 0


def test_duplicate_rid_is_400(server, wait_idle):
    payload = {"text": PROMPT, "rid": "dup", "stream": True,
               "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}}
    with httpx.stream("POST", server.url + "/generate", json=payload, timeout=TIMEOUT) as r:
        lines = r.iter_lines()  # keep a reference: a dropped iterator closes the connection
        next(lines)
        again = post(server, "/generate", dict(payload, stream=False), timeout=30)
        assert again.status_code == 400, again.text
    assert wait_idle(server.client)["kv_used_tokens"] == 0


def test_duplicate_rid_leaves_the_running_requests_metrics(server, wait_idle):
    def e2e_count():
        text = httpx.get(server.url + "/metrics").text
        return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
                   if s.name == "specpilot_e2e_request_latency_seconds_count")

    wait_idle(server.client)
    before = e2e_count()
    payload = {"text": PROMPT, "rid": "dup-metrics", "stream": True,
               "sampling_params": {"max_new_tokens": 40, "ignore_eos": True}}
    with httpx.stream("POST", server.url + "/generate", json=payload, timeout=TIMEOUT) as r:
        lines = r.iter_lines()
        next(lines)
        again = post(server, "/generate", dict(payload, stream=False), timeout=30)
        assert again.status_code == 400, again.text
        assert any("[DONE]" in line for line in lines)  # the first one runs to its end
    wait_idle(server.client)
    assert e2e_count() == before + 1  # its latency recorded, the refused one's not


# ---------------------------------------------------------------------------- api key


def test_api_key(keyed_server):
    url, API_KEY = keyed_server.url, keyed_server.args.api_key
    assert httpx.get(url + "/v1/models").status_code == 401
    r = httpx.get(url + "/v1/models", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    assert post(keyed_server, "/generate", {"text": "hi"}).status_code == 401
    assert httpx.get(url + "/health").status_code == 200
    assert httpx.get(url + "/metrics").status_code == 200
    ok = httpx.get(url + "/v1/models", headers={"Authorization": f"Bearer {API_KEY}"})
    assert ok.status_code == 200
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url + "/v1", api_key="wrong").models.list()
    client = openai.OpenAI(base_url=url + "/v1", api_key=API_KEY, timeout=TIMEOUT)
    r = client.completions.create(model="default", prompt=PROMPT, max_tokens=2, temperature=0)
    assert r.choices[0].text


# ---------------------------------------------------------------------------- info routes


def test_info_routes(server):
    url, info = server.url, server.client.model_info
    models = httpx.get(url + "/v1/models").json()
    assert models["object"] == "list"
    card = models["data"][0]
    assert card["id"] == info["served_model_name"]
    assert card["max_model_len"] == info["context_length"]
    r = post(server, "/v1/completions", {"model": card["id"], "prompt": "hi", "max_tokens": 1})
    assert r.status_code == 200
    assert httpx.get(url + "/health").status_code == 200
    assert httpx.get(url + "/health_generate", timeout=TIMEOUT).status_code == 200
    mi = httpx.get(url + "/get_model_info").json()
    assert mi["model_path"] == info["model_path"] and mi["is_generation"] is True
    si = httpx.get(url + "/get_server_info").json()
    assert si["max_total_tokens"] == MAX_TOTAL_TOKENS and si["dtype"] == "float32"
    assert si["device"] == "cpu"  # the resolved device, not the flag's default (None)
    assert si["max_total_num_tokens"] == MAX_TOTAL_TOKENS and si["version"]
    st = si["internal_states"][0]
    assert "last_gen_throughput" in st and st["memory_usage"]["token_capacity"] == MAX_TOTAL_TOKENS
    assert httpx.get(url + "/flush_cache").status_code == 200
    assert httpx.post(url + "/flush_cache").status_code == 200


def test_flush_cache_busy_is_400(server, wait_idle):
    payload = {"text": PROMPT, "stream": True,
               "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}}
    with httpx.stream("POST", server.url + "/generate", json=payload, timeout=TIMEOUT) as r:
        lines = r.iter_lines()  # keep a reference: a dropped iterator closes the connection
        next(lines)
        assert httpx.post(server.url + "/flush_cache").status_code == 400
    wait_idle(server.client)
    assert httpx.post(server.url + "/flush_cache").status_code == 200


def test_metrics(server):
    generate(server, PROMPT, 3)
    r = httpx.get(server.url + "/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    samples = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            samples.setdefault(s.name, []).append(s)
    total = lambda name: sum(s.value for s in samples.get(name, []))  # noqa: E731
    assert total("specpilot_prompt_tokens_total") > 0
    assert total("specpilot_generation_tokens_total") >= 3
    reasons = {s.labels.get("finish_reason") for s in samples["specpilot_requests_total"]}
    assert "length" in reasons
    assert total("specpilot_e2e_request_latency_seconds_count") > 0
    assert total("specpilot_time_to_first_token_seconds_count") > 0
    for gauge in ("specpilot_num_running_reqs", "specpilot_num_waiting_reqs",
                  "specpilot_token_usage", "specpilot_gen_throughput"):
        assert gauge in samples, gauge
    assert total("specpilot_kv_total_tokens") == MAX_TOTAL_TOKENS
