"""CLI: ``python -m specpilot.w12 convert <hf-dir> <out-dir>`` / ``check <hf-dir>``."""
from __future__ import annotations

import argparse
import sys

from .convert import check, convert, load_w12
from .format import ESC_THRESHOLD, bitwise_equal


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specpilot.w12", description="W12 lossless 12-bit bf16 weights")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert", help="write a W12 checkpoint")
    c.add_argument("hf_dir")
    c.add_argument("out_dir")
    c.add_argument("--threshold", type=float, default=ESC_THRESHOLD, help="max escape rate before bf16 fallback")
    c.add_argument("--verify", action="store_true", help="reload the output and compare bitwise")
    c.add_argument("--device", default="cpu",
                   help="where to encode (cpu, or cuda: much faster on a 27B model; same result)")
    c.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    k = sub.add_parser("check", help="convert in memory and verify the round trip bitwise")
    k.add_argument("hf_dir")
    k.add_argument("--threshold", type=float, default=ESC_THRESHOLD)
    k.add_argument("--quiet", action="store_true", help="only per-class and summary lines")
    a = ap.parse_args(argv)
    try:
        return _run(a)
    except (FileNotFoundError, ValueError) as e:   # bad input: a message, not a traceback
        print(f"error: {e}", file=sys.stderr)
        return 2


def _run(a) -> int:
    """Exit status: 0 lossless, 1 a tensor not bitwise identical (2: bad input, in main)."""
    if a.cmd == "convert":
        convert(a.hf_dir, a.out_dir, a.threshold, device=a.device, progress=not a.no_progress)
        if a.verify:
            from .convert import iter_hf_tensors
            dec = load_w12(a.out_dir)
            ok = [bitwise_equal(dec[n], t) for n, t in iter_hf_tensors(a.hf_dir)]
            print(f"lossless: {sum(ok)}/{len(ok)} tensors bitwise identical")
            return 0 if all(ok) else 1
        return 0
    s = check(a.hf_dir, a.threshold, verbose=not a.quiet)
    return 0 if s["ok"] == s["total"] else 1


if __name__ == "__main__":
    sys.exit(main())
