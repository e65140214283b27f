"""`python -m specpilot.bench ...`: the benchmark (scripts/bench.sh); see specpilot.bench.run."""

import sys

from specpilot.bench.run import main

sys.exit(main())
