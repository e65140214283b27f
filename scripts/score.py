#!/usr/bin/env python3
"""Sanity scores of a benchmark run: `python scripts/score.py <setting> <engine>-<run>`.

gsm8k (numeric answer match), math500 (boxed answer match), humaneval and mbpp (unit tests in a
subprocess sandbox with time and memory limits) from the outputs bench.sh recorded; writes
scores.json and scores.jsonl in results/<setting>/<engine>-<run>/. See specpilot/evals/score.py.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from specpilot.evals.score import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
