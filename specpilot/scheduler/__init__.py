"""Continuous batching on the CPU: requests, KV bookkeeping, stop conditions, detokenization."""
