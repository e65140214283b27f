"""Speculative decoding: drafters, draft KV, the stock worker, accept rules."""
