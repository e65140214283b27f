"""Assemble the serving stack: worker (ar or stock) -> Scheduler -> EngineClient (started)."""

from __future__ import annotations

import logging

from specpilot.config import ServerArgs
from specpilot.build import build_worker
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
    worker = build_worker(args)
    tokenizer = load_tokenizer(args)
    scheduler = Scheduler(worker, tokenizer, args.max_running_requests,
                          args.chunked_prefill_size, args.max_prefill_tokens,
                          overlap=args.overlap_schedule)
    info = worker.info
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
        "speculative_algorithm": info.speculative_algorithm,
        "speculative_num_draft_tokens": info.decode_len if info.speculative_algorithm else None,
    }
    client = EngineClient(scheduler, tokenizer, model_info)
    client.start()
    return client
