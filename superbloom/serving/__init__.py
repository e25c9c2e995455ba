"""serving/: the HTTP service: the FastAPI app, its batcher and guards, autocomplete, fill route, the launcher."""
