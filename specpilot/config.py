"""Frozen configuration: ServerArgs (the CLI, SGLang flag names) and the model facts read from HF.

Every CLI flag is a field of ServerArgs: `--chunked-prefill-size` <-> `chunked_prefill_size`.
Facts measured at start-up (KV pool size, eos ids) are returned by the engine, never written here.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Optional

DTYPES = ("auto", "float32", "float", "bfloat16", "float16", "half")
DEVICES = ("cuda", "cpu")
ATTENTION_BACKENDS = ("auto", "torch", "triton")
DRAFT_WEIGHT_FORMATS = ("same", "bf16", "w12")


@dataclass(frozen=True)
class ServerArgs:
    model_path: Optional[str] = None  # None: the embedded demo model (python -m specpilot.demo)
    tokenizer_path: Optional[str] = None
    host: str = "127.0.0.1"
    port: int = 30000
    dtype: str = "auto"  # auto: the checkpoint's dtype on GPU, float32 on CPU
    device: Optional[str] = None  # None: cuda if available else cpu
    context_length: Optional[int] = None  # None: the model's max_position_embeddings
    mem_fraction_static: float = 0.85  # GPU: share of total memory for weights + KV pool
    # KV pool size in tokens, the most a request may hold (a server request's max_tokens is
    # clamped to it); None: from memory. The pool has 64 slots more, never counted here: a
    # request that long still has room for a verify block
    max_total_tokens: Optional[int] = None
    max_running_requests: int = 64
    chunked_prefill_size: int = 2048  # <= 0 disables chunking
    max_prefill_tokens: int = 16384
    served_model_name: Optional[str] = None
    api_key: Optional[str] = None
    random_seed: int = 0
    log_level: str = "info"
    skip_tokenizer_init: bool = False
    load_format: str = "auto"  # auto: safetensors; dummy: random weights from config.json alone
    weight_format: str = "auto"  # auto: the checkpoint's (a w12 convert folder: w12); w12: at load
    attention_backend: str = "auto"  # auto: triton on CUDA, torch on CPU | torch | triton
    disable_cuda_graph: bool = False  # CUDA graphs of DECODE / VERIFY (CUDA + triton backend)
    cuda_graph_max_bs: Optional[int] = None  # largest graphed batch; None: min(max running, 32)
    disable_draft_cuda_graph: bool = False  # graph VERIFY only: block pass and step graph eager
    # DECODE step k+1 is queued before step k is read (ar); for a speculative engine, greedy
    # steps that the whole-step graph runs (StockSpecWorker.launch_lagged)
    disable_overlap_schedule: bool = False
    # speculative decoding (none given: the `ar` engine)
    speculative_algorithm: Optional[str] = None  # DFLASH | DFLASH2 | DSPARK; None: from the drafter
    speculative_draft_model_path: Optional[str] = None
    speculative_num_draft_tokens: Optional[int] = None  # verify rows incl. the anchor
    speculative_draft_load_format: str = "auto"
    # same: the target's (--weight-format); bf16: the drafter's linear layers stay dense; w12:
    # converted at load (as --weight-format w12 does for the target)
    speculative_draft_weight_format: str = "same"

    def validate(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"--dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.device is not None and self.device not in DEVICES:
            raise ValueError(f"--device must be one of {DEVICES}, got {self.device!r}")
        if not 0 < self.mem_fraction_static < 1:
            raise ValueError("--mem-fraction-static must be in (0, 1)")
        for flag, v in (("--load-format", self.load_format),
                        ("--speculative-draft-load-format", self.speculative_draft_load_format)):
            if v not in ("auto", "dummy"):
                raise ValueError(f"{flag} must be auto or dummy, got {v!r}")
        if self.weight_format not in ("auto", "w12"):
            raise ValueError(f"--weight-format must be auto or w12, got {self.weight_format!r}")
        if self.speculative_draft_weight_format not in DRAFT_WEIGHT_FORMATS:
            raise ValueError(f"--speculative-draft-weight-format must be one of "
                             f"{DRAFT_WEIGHT_FORMATS}, got {self.speculative_draft_weight_format!r}")
        if self.attention_backend not in ATTENTION_BACKENDS:
            raise ValueError(f"--attention-backend must be one of {ATTENTION_BACKENDS}, "
                             f"got {self.attention_backend!r}")
        if self.cuda_graph_max_bs is not None and self.cuda_graph_max_bs < 1:
            raise ValueError("--cuda-graph-max-bs must be >= 1")
        if self.max_running_requests < 1:
            raise ValueError("--max-running-requests must be >= 1")
        if self.context_length is not None and self.context_length < 2:
            raise ValueError("--context-length must be >= 2")
        if self.max_total_tokens is not None and self.max_total_tokens < 2:
            raise ValueError("--max-total-tokens must be >= 2")
        spec_given = (self.speculative_algorithm is not None,
                      self.speculative_num_draft_tokens is not None,
                      self.speculative_draft_weight_format != "same")
        if self.speculative_draft_model_path is None and any(spec_given):
            raise ValueError("speculative flags need --speculative-draft-model-path")
        if self.speculative_num_draft_tokens is not None and self.speculative_num_draft_tokens < 2:
            raise ValueError("--speculative-num-draft-tokens must be >= 2 (the anchor and at "
                             "least one proposal)")
        algos = ("DFLASH", "DFLASH2", "DSPARK")
        if self.speculative_algorithm is not None and self.speculative_algorithm.upper() not in algos:
            raise ValueError(f"--speculative-algorithm must be one of {algos}")

    @property
    def overlap_schedule(self) -> bool:
        """Whether the overlap scheduler runs: unless --disable-overlap-schedule, for every
        engine. A speculative engine queues its greedy steps that the whole-step graph serves
        one ahead, with the next step's anchors and positions advanced on the device
        (StockSpecWorker.launch_lagged); its other steps run as without it."""
        return not self.disable_overlap_schedule

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        """One flag per field, named as the field with dashes; `--model` is an alias."""
        for f in dataclasses.fields(ServerArgs):
            flag = "--" + f.name.replace("_", "-")
            names = [flag, "--model"] if f.name == "model_path" else [flag]
            if f.type in ("bool", bool):
                parser.add_argument(*names, dest=f.name, action="store_true")
            else:
                kind = {"int": int, "float": float}.get(str(f.type).replace("Optional[", "").rstrip("]"), str)
                parser.add_argument(*names, dest=f.name, type=kind, default=f.default)

    @classmethod
    def from_cli(cls, argv: Optional[list[str]] = None) -> "ServerArgs":
        parser = argparse.ArgumentParser(prog="python -m specpilot.launch_server")
        cls.add_cli_args(parser)
        ns = parser.parse_args(argv)
        args = cls(**vars(ns))
        try:
            args.validate()
        except ValueError as e:
            parser.error(str(e))
        return args
