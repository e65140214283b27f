"""`python -m specpilot.validate <setting> <engine>`: see specpilot.validate.cli."""

import sys

from specpilot.validate.cli import main

sys.exit(main())
