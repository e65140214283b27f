"""Eval data and scoring: prompt sets with checksums (datasets), answer extraction (extract),
the subprocess sandbox for generated code (sandbox), and the scorer of benchmark runs (score,
scripts/score.py). Nothing here is imported by the runtime."""
