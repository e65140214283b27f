#!/usr/bin/env python3
"""Token-forcing validation: `python scripts/validate.py <setting> <engine>`.

ar's greedy outputs are forced through the engine (and the engine's through ar); every position
where the argmax disagrees is listed with its top-2 logit gap, and the run fails unless each is
a near-tie (gap below the setting's validate.near_tie_gap, or --threshold). See
specpilot/validate/cli.py and specpilot/validate/forcing.py.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from specpilot.validate.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
