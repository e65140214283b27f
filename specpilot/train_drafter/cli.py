"""Command line of `python -m specpilot.train_drafter` (argument parsing and checks only)."""

from __future__ import annotations

import argparse
import os


def default_work_dir() -> str:
    from specpilot.demo import cache_root

    return str(cache_root() / "train_drafter")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m specpilot.train_drafter",
        description="Train a DFlash-format block drafter for a target on the target's own greedy "
                    "continuations of training prompts (gsm8k first half, mbpp outside its test "
                    "split, optional synthetic prompts). Writes config.json + model.safetensors + "
                    "train_meta.json to --out.")
    g = ap.add_argument_group("paths")
    g.add_argument("--target", required=True, help="target HF folder (config, weights, tokenizer)")
    g.add_argument("--data-dir", help="folder with gsm8k_test.jsonl and mbpp.jsonl")
    g.add_argument("--out", required=True, help="export folder for the drafter")
    g.add_argument("--work-dir", default=None,
                   help="cache of generated data (default $SPECPILOT_CACHE/train_drafter)")
    g.add_argument("--state-dir", default=None,
                   help="where trainer_state.pt and train_log.jsonl go (default: --out)")
    g.add_argument("--resume", default=None,
                   help="folder with trainer_state.pt (exact resume) or an exported drafter "
                        "(warm start: weights only)")
    g = ap.add_argument_group("drafter")
    g.add_argument("--layers", type=int, default=2, help="draft decoder layers (default 2)")
    g.add_argument("--block-size", type=int, default=16, help="block rows incl. the anchor")
    g.add_argument("--intermediate-size", type=int, default=None, help="default: the target's")
    g.add_argument("--target-layer-ids", default=None,
                   help="comma-separated target layer ids (default: the DFlash rule)")
    g.add_argument("--mask-token-id", type=int, default=None,
                   help="default: chosen automatically (see specpilot/train_drafter/data.py)")
    g.add_argument("--grow-layers", type=int, default=0,
                   help="with --resume of an exported drafter: append N layers that start as the "
                        "identity (a deeper drafter warm-started from a shallower one)")
    g.add_argument("--save-dtype", default="bfloat16", choices=["bfloat16", "float32", "float16"])
    g = ap.add_argument_group("data")
    g.add_argument("--sources", default="gsm8k,mbpp", help="comma-separated: gsm8k, mbpp, or ''")
    g.add_argument("--synthetic", type=int, default=0, help="number of synthetic prompts to add")
    g.add_argument("--max-prompts", type=int, default=None, help="random subset of the prompts")
    g.add_argument("--gsm8k-variants", type=int, default=0,
                   help="add N prompts rewritten from the gsm8k training rows (new numbers and "
                        "names; see prompts.gsm8k_variants)")
    g.add_argument("--prompts-file", action="append", default=[], metavar="JSONL",
                   help="more training prompts, one JSON object with a \"prompt\" per line (e.g. "
                        "from python -m specpilot.train_drafter.self_instruct); repeatable; "
                        "prompts starting like a benchmark item are dropped")
    g.add_argument("--repeat", action="append", default=[], metavar="SOURCE=N",
                   help="show the sequences of one prompt source N times per epoch (an integer "
                        ">= 1; sources as in the printed data line, e.g. "
                        "self-instruct/competition=2); repeatable")
    g.add_argument("--max-new-tokens", type=int, default=256, help="target continuation length")
    g.add_argument("--max-len", type=int, default=512, help="sequence cap (prompt + completion)")
    g.add_argument("--samples-per-prompt", type=int, default=1,
                   help="continuations per prompt: the greedy one plus N-1 sampled (default 1)")
    g.add_argument("--temperature", type=float, default=0.8, help="for the sampled ones")
    g.add_argument("--top-p", type=float, default=0.95, help="for the sampled ones")
    g.add_argument("--gen-batch-size", type=int, default=64)
    g.add_argument("--gen-admit", type=int, default=None, metavar="N",
                   help="--gen-backend engine: start waiting jobs only when N of them can start "
                        "together, so they are prefilled in one batch (default: an eighth of "
                        "--gen-batch-size; 1 starts each as soon as a running one finishes)")
    g.add_argument("--gen-backend", default="hf", choices=["hf", "engine"],
                   help="what generates the data: transformers `generate` (hf, default) or our "
                        "own engine (the `ar` engine's kernels, per-request sampling seeds)")
    g.add_argument("--gen-fraction", type=float, default=0.6,
                   help="share of --max-minutes data generation may use (rest is training; 0: "
                        "generate nothing, train on what the caches hold)")
    g.add_argument("--gen-shard", default=None, metavar="I/N",
                   help="with --generate-only: generate only jobs j with j %% N == I (one process "
                        "per GPU); the caches of all shards are read back together")
    g.add_argument("--generate-only", action="store_true",
                   help="generate (and cache) the training data, then exit without training")
    g = ap.add_argument_group("training")
    g.add_argument("--steps", type=int, default=None,
                   help="optimizer steps (default: as many as --max-minutes allows)")
    g.add_argument("--max-minutes", type=float, default=None,
                   help="wall-clock budget of the whole run; stops and saves cleanly before it")
    g.add_argument("--stop-at-step", type=int, default=None,
                   help="stop (and save) at this step without changing the schedule")
    g.add_argument("--batch-size", type=int, default=8, help="sequences per step")
    g.add_argument("--blocks-per-seq", type=int, default=8, help="anchor blocks per sequence")
    g.add_argument("--gamma", type=float, default=7.0, help="loss weight exp(-(j-1)/gamma)")
    g.add_argument("--distill", default="none", choices=["none", "argmax", "kl"],
                   help="what each block row learns: the data token (none, the released DFlash "
                        "recipe), the target's own greedy token at that position (argmax), or "
                        "the target's whole distribution there (kl); see train_drafter/model.py")
    g.add_argument("--lr", type=float, default=6e-4)
    g.add_argument("--min-lr-ratio", type=float, default=0.1)
    g.add_argument("--warmup", type=int, default=50, help="warmup steps")
    g.add_argument("--schedule", default="cosine", choices=["cosine", "linear"])
    g.add_argument("--weight-decay", type=float, default=0.01)
    g.add_argument("--grad-clip", type=float, default=1.0)
    g.add_argument("--save-every", type=int, default=200, help="checkpoint every N steps")
    g.add_argument("--log-every", type=int, default=10)
    g.add_argument("--profile-steps", type=int, default=0, metavar="N",
                   help="run torch.profiler over N steps after the first 20 and print the "
                        "operators that took the most device (or CPU) time")
    g.add_argument("--device", default=None, help="cpu | cuda (default: cuda if available)")
    g.add_argument("--seed", type=int, default=0)
    return ap


def default_gen_admit(gen_batch_size: int) -> int:
    """--gen-admit's default: an eighth of the running batch (32 at 256, where an H200 data call
    generated 1.56x the sequences per shard of --gen-admit 1, demo-drafter.md session 22)."""
    return max(1, gen_batch_size // 8)


def parse_args(argv=None) -> argparse.Namespace:
    ap = build_parser()
    a = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(a.target, "config.json")):
        ap.error(f"--target {a.target!r} is not a Hugging Face model folder (no config.json)")
    if a.gen_admit is None:
        a.gen_admit = default_gen_admit(a.gen_batch_size)
    a.sources = tuple(s for s in a.sources.split(",") if s.strip())
    if a.sources and not a.data_dir:
        ap.error("--data-dir is required for --sources gsm8k/mbpp (or pass --sources '' "
                 "with --synthetic N)")
    if a.data_dir and not os.path.isdir(a.data_dir):
        ap.error(f"--data-dir {a.data_dir!r} is not a folder")
    for path in a.prompts_file:
        if not os.path.isfile(path):
            ap.error(f"--prompts-file {path!r} is not a file")
    if a.resume and not os.path.isdir(a.resume):
        ap.error(f"--resume {a.resume!r} is not a folder")
    if a.steps is None and a.max_minutes is None and not a.generate_only:
        ap.error("give --steps and/or --max-minutes")
    if a.gen_shard is not None:
        if not a.generate_only:
            ap.error("--gen-shard needs --generate-only (training reads every shard's cache)")
        try:
            i, n = (int(x) for x in a.gen_shard.split("/"))
        except ValueError:
            ap.error(f"--gen-shard must be I/N, e.g. 0/2: {a.gen_shard!r}")
        if not 0 <= i < n:
            ap.error(f"--gen-shard {a.gen_shard}: need 0 <= I < N")
        a.gen_shard = (i, n)
    else:
        a.gen_shard = (0, 1)
    repeats = {}
    for item in a.repeat:
        src, _, n = item.rpartition("=")
        if not src or not n.isdigit() or int(n) < 1:
            ap.error(f"--repeat must be SOURCE=N with an integer N >= 1: {item!r}")
        repeats[src] = int(n)
    a.repeat = repeats
    if a.grow_layers < 0:
        ap.error(f"--grow-layers must be >= 0, got {a.grow_layers}")
    if a.grow_layers and not a.resume:
        ap.error("--grow-layers needs --resume (the drafter to grow)")
    if a.gsm8k_variants < 0:
        ap.error(f"--gsm8k-variants must be >= 0, got {a.gsm8k_variants}")
    if a.gsm8k_variants and not a.data_dir:
        ap.error("--gsm8k-variants needs --data-dir (the gsm8k training rows)")
    checks = [("--layers", a.layers, 1), ("--block-size", a.block_size, 2),
              ("--max-new-tokens", a.max_new_tokens, 2), ("--batch-size", a.batch_size, 1),
              ("--blocks-per-seq", a.blocks_per_seq, 1), ("--gen-batch-size", a.gen_batch_size, 1),
              ("--gen-admit", a.gen_admit, 1),
              ("--save-every", a.save_every, 1), ("--log-every", a.log_every, 1),
              ("--profile-steps", a.profile_steps, 0),
              ("--warmup", a.warmup, 1), ("--max-len", a.max_len, 8),
              ("--samples-per-prompt", a.samples_per_prompt, 1)]
    for flag, v, lo in checks:
        if v < lo:
            ap.error(f"{flag} must be >= {lo}, got {v}")
    for flag, v in (("--steps", a.steps), ("--max-prompts", a.max_prompts),
                    ("--max-minutes", a.max_minutes), ("--lr", a.lr), ("--gamma", a.gamma),
                    ("--synthetic", None if a.synthetic == 0 else a.synthetic)):
        if v is not None and v <= 0:
            ap.error(f"{flag} must be > 0, got {v}")
    if not (a.temperature > 0 and 0 < a.top_p <= 1):
        ap.error("--temperature must be > 0 and --top-p in (0, 1]")
    if not 0 <= a.gen_fraction <= 1:
        ap.error("--gen-fraction must be in [0, 1] (0: train on the cached data only)")
    if a.target_layer_ids:
        try:
            a.target_layer_ids = [int(x) for x in a.target_layer_ids.split(",")]
        except ValueError:
            ap.error(f"--target-layer-ids must be comma-separated integers: {a.target_layer_ids!r}")
    a.work_dir = a.work_dir or default_work_dir()
    a.state_dir = a.state_dir or a.out
    return a
