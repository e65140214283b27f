"""HTTP front end: FastAPI routes, tokenization, the bridge to the scheduler thread."""
