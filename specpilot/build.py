"""Assemble the engine a ServerArgs asks for: ModelRunner (`ar`), or the stock speculative worker
around it when --speculative-draft-model-path is given. Both expose `info` and `forward`."""

from __future__ import annotations

from specpilot.config import ServerArgs
from specpilot.engine.model_runner import ModelRunner


def build_worker(args: ServerArgs):
    runner = ModelRunner(args.model_path, dtype=args.dtype, device=args.device,
                         context_length=args.context_length,
                         mem_fraction_static=args.mem_fraction_static,
                         max_total_tokens=args.max_total_tokens,
                         max_running_requests=args.max_running_requests,
                         random_seed=args.random_seed, load_format=args.load_format)
    if args.speculative_draft_model_path is None:
        return runner
    from specpilot.spec.stock_worker import StockSpecWorker

    return StockSpecWorker(runner, args.speculative_draft_model_path,
                           args.speculative_num_draft_tokens, args.speculative_algorithm,
                           args.speculative_draft_load_format)
