"""Assemble the serving stack: ModelRunner (engine) -> Scheduler -> EngineClient (started)."""

from __future__ import annotations

import logging

from specpilot.config import ServerArgs
from specpilot.engine.model_runner import ModelRunner
from specpilot.scheduler.scheduler import Scheduler
from specpilot.server.engine_client import EngineClient

log = logging.getLogger(__name__)


def load_tokenizer(args: ServerArgs):
    if args.skip_tokenizer_init:
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(args.tokenizer_path or args.model_path)


def build_engine_client(args: ServerArgs) -> EngineClient:
    if args.model_path is None:
        raise ValueError("build_engine_client needs args.model_path")
    runner = ModelRunner(args.model_path, dtype=args.dtype, device=args.device,
                         context_length=args.context_length,
                         mem_fraction_static=args.mem_fraction_static,
                         max_total_tokens=args.max_total_tokens,
                         max_running_requests=args.max_running_requests,
                         random_seed=args.random_seed)
    tokenizer = load_tokenizer(args)
    scheduler = Scheduler(runner, tokenizer, args.max_running_requests,
                          args.chunked_prefill_size, args.max_prefill_tokens)
    info = runner.info
    model_info = {
        "model_path": args.model_path,
        "tokenizer_path": args.tokenizer_path or args.model_path,
        "served_model_name": args.served_model_name or args.model_path,
        "context_length": info.context_length,
        "vocab_size": info.vocab_size,
        "eos_token_ids": list(info.eos_token_ids),
        "max_total_tokens": info.num_kv_slots,
        "device": info.device,
        "dtype": info.dtype,
        "architecture": info.architecture,
    }
    client = EngineClient(scheduler, tokenizer, model_info)
    client.start()
    return client
