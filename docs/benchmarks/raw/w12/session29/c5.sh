#!/usr/bin/env bash
# Session 29, call 5 (~70 s): the PDL GPU tests on the default now committed (on by default on
# sm_90, GEMVs triggering after their main loop): call 3 ran the engine tests with the GEMVs
# triggering at their start.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
L=$OUT/logs29c5; mkdir -p $L
timeout 100 python3 -m pytest -v -p no:cacheprovider -rfE tests/unit/test_pdl.py \
  tests/e2e/test_graph_path.py -k "pdl" > $L/tests.log 2>&1; echo "tests rc=$?"
grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed" $L/tests.log | cut -c1-160
