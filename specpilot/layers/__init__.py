"""Building blocks of the models: norms, rotary embeddings, the attention front end."""
