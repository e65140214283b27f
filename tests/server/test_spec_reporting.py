"""The server reports speculative acceptance in meta_info, /get_server_info and /metrics; the
figures are checked against a run with known acceptance (SGLANG_SIMULATE_ACC_LEN=3: every verify
step emits exactly 3 tokens, i.e. 2 accepted drafts plus the bonus)."""

import os

import httpx
import pytest

from specpilot.config import ServerArgs
from specpilot.server.launch import build_engine_client
from tests.e2e.tiny_drafters import make_drafter
from tests.e2e.tiny_models import make_tiny
from tests.server.conftest import ServerThread, free_port

B = 4


@pytest.fixture(scope="module")
def spec_server(tmp_path_factory):
    target = make_tiny("qwen3", tmp_path_factory.mktemp("t"))
    drafter = make_drafter("dflash", tmp_path_factory.mktemp("d"))
    os.environ["SGLANG_SIMULATE_ACC_LEN"] = "3"
    try:
        args = ServerArgs(model_path=target, device="cpu", port=free_port(), max_total_tokens=1024,
                          skip_tokenizer_init=True, speculative_draft_model_path=drafter,
                          speculative_num_draft_tokens=B)
        client = build_engine_client(args)
    finally:
        del os.environ["SGLANG_SIMULATE_ACC_LEN"]
    srv = ServerThread(client, args).start()
    yield srv
    srv.stop()
    client.shutdown()


def test_acceptance_is_reported(spec_server):
    url = spec_server.url
    r = httpx.post(url + "/generate", json={"input_ids": [5, 6, 7, 8],
                                            "sampling_params": {"temperature": 0,
                                                                "max_new_tokens": 13,
                                                                "ignore_eos": True}}, timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    m = body["meta_info"]
    assert len(body["output_ids"]) == m["completion_tokens"] == 13
    # 1 token from prefill + 4 verify steps x 3 tokens
    assert m["spec_verify_ct"] == 4
    assert m["spec_num_correct_drafts"] == 8
    assert m["spec_num_proposed_drafts"] == 4 * (B - 1)
    assert m["spec_accept_length"] == pytest.approx(13 / 4)
    assert m["spec_accept_rate"] == pytest.approx(8 / 12)
    info = httpx.get(url + "/get_server_info").json()
    assert info["internal_states"][0]["avg_spec_accept_length"] == pytest.approx(3.0)
    text = httpx.get(url + "/metrics").text
    for line in ('specpilot_spec_verify_steps_total{model_name=', 'specpilot_spec_accepted_tokens_total'):
        assert line in text
    vals = {ln.split("{")[0] + ("[" + ln.split('position="')[1].split('"')[0] + "]"
                                if 'position="' in ln else ""): float(ln.rsplit(" ", 1)[1])
            for ln in text.splitlines() if ln.startswith("specpilot_spec_")}
    assert vals["specpilot_spec_verify_steps_total"] == 4
    assert vals["specpilot_spec_draft_tokens_total"] == 12
    assert vals["specpilot_spec_accepted_tokens_total"] == 8
    assert [vals[f"specpilot_spec_accepted_tokens_by_position_total[{j}]"]
            for j in range(B - 1)] == [4, 4, 0]
