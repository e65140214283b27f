#!/usr/bin/env bash
# Session 25, call 4: the GEMV's GPU tests on the final tree (look-ahead for the bf16 kind only)
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_gemv.py -k "gpu_" 2>&1 | tail -4
