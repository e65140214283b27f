#!/usr/bin/env python3
"""Compare benchmark runs of a setting: `python scripts/compare.py speed <setting> [runs...]`.

Speedup of each engine over `ar` per benchmark and concurrency with 95% bootstrap confidence
intervals, output tokens/s, TPOT and acceptance length: a table on stdout, compare_speed.png
and compare_speed.json in results/<setting>/. See specpilot/bench/compare.py.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from specpilot.bench.compare import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
