"""The server's limits and timeouts (`ServeConfig`), in a module of its own that imports nothing heavy:
the app (serving/app.py), the launcher (serve.py) and the command line (`serve --help` shows the
defaults) read it without importing torch."""
from dataclasses import dataclass


@dataclass(frozen=True)
class ServeConfig:
    max_context: int = 512  # ids in a context / seed
    max_k: int = 1000  # predictions per request
    max_steps: int = 100  # ids added by one expansion
    max_id_chars: int = 1000  # characters in one id
    max_body_bytes: int = 1 << 20  # request body
    max_batch: int = 64  # queries ranked in one model call
    max_contexts: int = 256  # contexts in one list request to /v1/predict
    max_list: int = 100_000  # ids in an allow- or deny-list (the body size limits it too)
    max_batch_ids: int = 1 << 14  # padded context ids in one model call
    body_timeout: float = 10.0  # seconds to receive a whole request body, else 408 and the connection closed
    keep_alive_timeout: float = 5.0  # seconds an idle keep-alive connection stays open (uvicorn)
    head_timeout: float = 10.0  # seconds for a connection to deliver a complete request line and headers
    heavy_workers: int = 2  # heavy requests (expand, list predict, fill) running at once (lanes.py)
    heavy_queue: int = 32  # heavy requests waiting; one more is a 503 with Retry-After
    max_head_bytes: int = 16 * 1024  # a request line and headers (uvicorn's h11 limit): a longer head is a 400
    max_connections: int = 1024  # open connections (and requests) beyond which uvicorn answers 503

    def __post_init__(self):
        for name in ("body_timeout", "keep_alive_timeout", "head_timeout"):
            if not 0 < getattr(self, name) <= 3600:
                raise ValueError(f"{name} must be in (0, 3600] seconds, got {getattr(self, name)}")
        if self.max_head_bytes < 1024 or self.max_connections < 1:
            raise ValueError(f"max_head_bytes must be >= 1024 and max_connections >= 1, got {self.max_head_bytes}, "
                             f"{self.max_connections}")
        if self.heavy_workers < 1 or self.heavy_queue < 0:
            raise ValueError(f"heavy_workers must be >= 1 and heavy_queue >= 0, got {self.heavy_workers}, "
                             f"{self.heavy_queue}")
