"""The FastAPI app: SGLang's native routes and the OpenAI routes over one EngineClient.

`create_app(client, args)` returns the app; the caller runs it (uvicorn) and owns the client.

Contracts:
  * Every refused request gets `{"error": {"message", "type", "param", "code"}}` with a 4xx
    status (400 bad input, 401 api key, 404 unknown model / route); a 500 means a bug (here,
    or an engine failure reported as `error="internal error: ..."`).
    Bodies are parsed by us (not FastAPI) so malformed JSON and wrong types are 400s too.
  * `--api-key`: every route except /health and /metrics needs `Authorization: Bearer <key>`.
  * Requests whose client goes away are aborted in the engine (their KV freed): streaming
    responses abort in the generator's `finally` (Starlette cancels it on disconnect) and again
    in a background task (in case the body never started); non-streaming handlers poll
    `request.is_disconnected()` while they wait.
  * SSE: `data: <json>\\n\\n` per event, then `data: [DONE]\\n\\n`. /generate events carry the
    cumulative text and output_ids (SGLang's default); OpenAI chunks carry deltas, and the
    deltas of a choice concatenate to the non-streamed text.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import logging
import time
import uuid
from importlib import metadata
from typing import AsyncIterator, Callable

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException

from specpilot.core import GenerateInput, SamplingParams
from specpilot.server.metrics import CONTENT_TYPE, ServerMetrics
from specpilot.server.protocol import ChatCompletionRequest, CompletionRequest, GenerateReqInput
from specpilot.server.tokenizer_manager import (ClientGone, RequestError, RequestGroup,
                                                TokenizerManager, new_rid)

logger = logging.getLogger(__name__)

HEALTH_TIMEOUT_S = 60.0
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               405: "invalid_request_error", 503: "service_unavailable_error"}


def version() -> str:
    try:
        return metadata.version("specpilot")
    except metadata.PackageNotFoundError:
        return "0.0.0.dev0"


def error_body(message: str, status: int, err_type: str | None = None, param=None) -> dict:
    return {"object": "error",
            "error": {"message": message,
                      "type": err_type or ERROR_TYPES.get(status, "server_error"),
                      "param": param, "code": status}}


def error_response(message: str, status: int, err_type: str | None = None, param=None):
    return JSONResponse(error_body(message, status, err_type, param), status_code=status)


def _validation_message(e: ValidationError) -> tuple[str, str | None]:
    errs = e.errors(include_url=False)
    if errs and errs[0]["type"] == "json_invalid":
        return f"Invalid JSON body: {errs[0]['msg']}", None
    parts = [f"{'.'.join(map(str, err['loc'])) or 'body'}: {err['msg']}" for err in errs[:5]]
    param = ".".join(map(str, errs[0]["loc"])) if errs and errs[0]["loc"] else None
    return "Invalid request: " + "; ".join(parts), param


async def parse(request: Request, model_cls):
    body = await request.body()
    try:
        return model_cls.model_validate_json(body or b"{}")
    except ValidationError as e:
        msg, param = _validation_message(e)
        raise RequestError(msg, param=param) from None


def engine_error(message: str) -> RequestError:
    """A request the engine refused (400) or failed ("internal error: ...", 500)."""
    if message.startswith("internal error"):
        return RequestError(message, status=500, err_type="internal_server_error")
    return RequestError(message)


def sse(payload) -> str:
    if not isinstance(payload, str):
        payload = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return f"data: {payload}\n\n"


def create_app(client, args) -> FastAPI:
    tm = TokenizerManager(client, args)
    metrics = ServerMetrics(client, tm.served_model_name)
    prev_hook = client.on_output
    if prev_hook is None:
        client.on_output = metrics.on_output
    else:
        def chained(out, _a=prev_hook, _b=metrics.on_output):
            _a(out)
            _b(out)
        client.on_output = chained

    app = FastAPI(title="specpilot", version=version(), docs_url=None, redoc_url=None)
    app.state.client, app.state.tm, app.state.metrics = client, tm, metrics

    @app.exception_handler(RequestError)
    async def _request_error(_req, e: RequestError):
        return error_response(e.message, e.status, e.err_type, e.param)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_req, e: StarletteHTTPException):
        return error_response(str(e.detail), e.status_code)

    @app.exception_handler(Exception)
    async def _internal_error(_req, e: Exception):
        logger.exception("internal error")
        return error_response(f"Internal server error: {type(e).__name__}: {e}", 500,
                              "internal_server_error")

    def check_key(request: Request) -> None:
        if not args.api_key:
            return
        got = request.headers.get("authorization", "")
        if not hmac.compare_digest(got.encode(), f"Bearer {args.api_key}".encode()):
            raise RequestError("Invalid or missing API key (Authorization: Bearer <key>).",
                               status=401, err_type="authentication_error")

    open_routes = APIRouter()
    api = APIRouter(dependencies=[Depends(check_key)])

    # ------------------------------------------------------------------ running requests
    def start(group: RequestGroup) -> list[str]:
        rids = [inp.rid for inp in group.inputs]
        fresh = metrics.request_started(rids)
        try:
            group.submit()
        except Exception:  # e.g. a duplicate rid: the running request keeps its clock
            metrics.forget(fresh)
            raise
        return rids

    async def run_to_end(request: Request, group: RequestGroup):
        rids = start(group)
        try:
            states = await group.collect(request.is_disconnected)
        finally:
            group.close()
            metrics.forget(rids)
        err = group.first_error()
        if err:
            raise engine_error(err)
        return states

    def stream(group: RequestGroup, events: Callable[[], AsyncIterator]) -> StreamingResponse:
        rids = start(group)

        def cleanup():
            group.close()
            metrics.forget(rids)

        async def body():
            done = False
            try:
                async for payload in events():
                    yield sse(payload)
                yield sse("[DONE]")
                done = True
            finally:
                if not done:
                    logger.debug("stream of %s ended early (client gone)", rids)
                cleanup()

        return StreamingResponse(body(), media_type="text/event-stream",
                                 background=BackgroundTask(cleanup))

    async def engine_events(group: RequestGroup):
        """(index, state, delta) per engine output; raises RequestError on an engine error."""
        while group.open:
            i, _out, delta = await group.next_event()
            state = group.states[i]
            if state.error:
                raise engine_error(state.error)
            yield i, state, delta

    def stream_error(e: RequestError) -> dict:
        return error_body(e.message, e.status, e.err_type, e.param)

    # ------------------------------------------------------------------ native
    @api.post("/generate")
    async def generate(request: Request):
        req = await parse(request, GenerateReqInput)
        inputs, batch = tm.prepare_generate(req)
        group = RequestGroup(client, inputs)
        if not req.stream:
            try:
                states = await run_to_end(request, group)
            except ClientGone:
                return Response(status_code=499)
            objs = [tm.generate_object(s, group.t0) for s in states]
            return JSONResponse(objs if batch else objs[0])

        async def events():
            try:
                async for i, state, delta in engine_events(group):
                    if delta or state.done or state.output_ids:
                        obj = tm.generate_object(state, group.t0)
                        if batch:
                            obj["index"] = i
                        yield obj
            except RequestError as e:
                yield stream_error(e)

        return stream(group, events)

    # ------------------------------------------------------------------ OpenAI
    async def openai_route(request: Request, chat: bool):
        req = await parse(request, ChatCompletionRequest if chat else CompletionRequest)
        inputs = tm.prepare_chat(req) if chat else tm.prepare_completion(req)
        n = req.n or 1
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        group = RequestGroup(client, inputs)
        if not req.stream:
            try:
                states = await run_to_end(request, group)
            except ClientGone:
                return Response(status_code=499)
            obj = tm.chat_object(rid, states, n) if chat else tm.completion_object(rid, states, n)
            return JSONResponse(obj)

        async def events():
            if chat:
                for i in range(len(inputs)):
                    yield tm.chunk(rid, True, i, "", role=True)
            try:
                async for i, state, delta in engine_events(group):
                    if state.done:
                        yield tm.chunk(rid, chat, i, delta or None, state=state)
                    elif delta:
                        yield tm.chunk(rid, chat, i, delta)
            except RequestError as e:
                yield stream_error(e)
                return
            if req.include_usage:
                yield tm.usage_chunk(rid, chat, group.states, n)

        return stream(group, events)

    @api.post("/v1/completions")
    async def completions(request: Request):
        return await openai_route(request, chat=False)

    @api.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await openai_route(request, chat=True)

    @api.get("/v1/models")
    async def models():
        card = {"id": tm.served_model_name, "object": "model", "created": int(time.time()),
                "owned_by": "specpilot", "root": tm.model_path,
                "max_model_len": tm.context_length}
        return {"object": "list", "data": [card]}

    # ------------------------------------------------------------------ health and info
    @open_routes.get("/health")
    async def health():
        alive = getattr(client, "is_alive", None)
        if alive is not None and not alive():
            return error_response("The scheduler thread is not running.", 503)
        return Response(status_code=200)

    @api.get("/health_generate")
    async def health_generate(request: Request):
        inp = GenerateInput(rid="health-" + new_rid(), input_ids=[0],
                            sampling=SamplingParams(max_new_tokens=1, temperature=0.0))
        group = RequestGroup(client, [inp])
        start(group)
        try:
            while group.open:
                if await group.next_event(HEALTH_TIMEOUT_S) is None:
                    return error_response("health generation timed out", 503)
        finally:
            group.close()
            metrics.forget([inp.rid])
        if group.first_error():
            return error_response(f"health generation failed: {group.first_error()}", 503)
        return Response(status_code=200)

    def model_info() -> dict:
        info = dict(client.model_info)
        info.update({"model_path": tm.model_path,
                     "tokenizer_path": info.get("tokenizer_path") or args.tokenizer_path
                     or tm.model_path,
                     "served_model_name": tm.served_model_name, "is_generation": True,
                     "preferred_sampling_params": None, "weight_version": "default",
                     "has_image_understanding": False, "has_audio_understanding": False})
        return info

    @api.get("/get_model_info")
    @api.get("/model_info")
    async def get_model_info():
        return model_info()

    @api.get("/get_server_info")
    @api.get("/server_info")
    async def get_server_info():
        info = dataclasses.asdict(args)
        info["api_key"] = None if args.api_key is None else "<redacted>"
        mi = model_info()
        for key, value in mi.items():
            if info.get(key) is None or key in ("device", "dtype"):  # resolved, not "auto"
                info[key] = value
        pool = mi.get("max_total_tokens")
        max_req = min(tm.context_length, pool) if pool else tm.context_length
        info.update({"max_total_num_tokens": pool, "max_req_input_len": max_req - 1,
                     "internal_states": [internal_state()], "version": version()})
        return info

    def internal_state() -> dict:
        s = dict(client.stats())
        st = {"last_gen_throughput": s.pop("gen_throughput", 0.0),
              "memory_usage": {"weight": s.pop("weight_gb", 0.0),
                               "kvcache": s.pop("kvcache_gb", 0.0),
                               "token_capacity": s.get("kv_total_tokens", 0),
                               "graph": s.pop("graph_gb", 0.0)},
              "effective_max_running_requests_per_dp": args.max_running_requests}
        st.update(s)  # num_running, num_waiting, kv_*, num_retractions, spec keys if any
        return st

    @api.api_route("/flush_cache", methods=["GET", "POST"])
    async def flush_cache():
        if client.flush_cache():
            return PlainTextResponse("Cache flushed.\n", status_code=200)
        return PlainTextResponse("Cache not flushed. Please check for pending requests.\n",
                                 status_code=400)

    @open_routes.get("/metrics")
    async def get_metrics():
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    app.include_router(open_routes)
    app.include_router(api)
    return app
