"""Building blocks of the models: norms, rotary embeddings, the attention front end, linear
layers (one-row bf16 GEMV inside CUDA graphs)."""
