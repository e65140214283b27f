"""Assemble the engine a ServerArgs asks for: ModelRunner (`ar`), or the stock speculative worker
around it when --speculative-draft-model-path is given. Both expose `info` and `forward`."""

from __future__ import annotations

import logging

from specpilot.config import ServerArgs
from specpilot.engine.model_runner import ModelRunner

log = logging.getLogger(__name__)


def build_worker(args: ServerArgs):
    runner = ModelRunner(args.model_path, dtype=args.dtype, device=args.device,
                         context_length=args.context_length,
                         mem_fraction_static=args.mem_fraction_static,
                         max_total_tokens=args.max_total_tokens,
                         max_running_requests=args.max_running_requests,
                         random_seed=args.random_seed, load_format=args.load_format,
                         attention_backend=args.attention_backend,
                         weight_format=args.weight_format)
    why_not = "disabled by --disable-cuda-graph" if args.disable_cuda_graph \
        else runner.graph_support()
    max_bs = args.cuda_graph_max_bs or min(args.max_running_requests, 32)
    if why_not is not None and runner.device.type == "cuda":
        log.info("CUDA graphs off: %s", why_not)
    if args.speculative_draft_model_path is None:
        if why_not is None:
            runner.enable_cuda_graphs(max_bs)
        return runner
    from specpilot.spec.stock_worker import StockSpecWorker

    worker = StockSpecWorker(runner, args.speculative_draft_model_path,
                             args.speculative_num_draft_tokens, args.speculative_algorithm,
                             args.speculative_draft_load_format,
                             args.speculative_draft_weight_format)
    if why_not is None:
        worker.enable_cuda_graphs(max_bs, draft=not args.disable_draft_cuda_graph)
    return worker
