"""Measurement workflow around the settings folders (see README "Deployments and the benchmark
workflow"): checkpoints (download, local paths, random demo drafter), launching a setting's
engine, the benchmark client and runner, summary arithmetic, bootstrap statistics, comparison.

Entry points: python -m specpilot.bench (bench.sh), python -m specpilot.bench.download
(download_models.sh), python -m specpilot.bench.serve (serve.sh), python -m
specpilot.bench.compare (compare.py). Nothing here is imported by the runtime.
"""
