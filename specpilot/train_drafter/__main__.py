"""`python -m specpilot.train_drafter --help`: see specpilot/train_drafter/__init__.py."""

import sys

from specpilot.train_drafter.train import main

sys.exit(main())
