"""Engine: model runner, KV pool, sampler (owns all device tensors)."""
