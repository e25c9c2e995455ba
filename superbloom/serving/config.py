"""The server's limits and timeouts (`ServeConfig`), in a module of its own that imports nothing heavy:
the app (serving/app.py), the launcher (serve.py) and the command line (`serve --help` shows the
defaults) read it without importing torch."""
from dataclasses import dataclass

from .._settings import setting


@dataclass(frozen=True)
class ServeConfig:
    max_context: int = setting(512, range=(1, None), help="ids per context / seed")
    max_k: int = setting(1000, range=(1, None), help="largest k")
    max_steps: int = setting(100, range=(1, None), help="largest expansion")
    max_id_chars: int = setting(1000, cli=False, help="characters in one id")
    max_body_bytes: int = setting(1 << 20, range=(1, None), help="request body size")
    max_batch: int = setting(64, range=(1, None), help="queries per model call")
    max_contexts: int = setting(256, range=(1, None), help="contexts per list request")
    max_list: int = setting(100_000, range=(1, None), help="ids in an allow- or deny-list (the body size limits "
                            "it too)")
    max_batch_ids: int = setting(1 << 14, cli=False, help="padded context ids in one model call")
    body_timeout: float = setting(10.0, range=(0.0, 3600.0), lo_open=True,
                                  help="seconds to receive a request body, then 408")
    keep_alive_timeout: float = setting(5.0, range=(0.0, 3600.0), lo_open=True,
                                        help="seconds an idle keep-alive connection stays open")
    head_timeout: float = setting(10.0, range=(0.0, 3600.0), lo_open=True,
                                  help="seconds to receive a request's line and headers")
    heavy_workers: int = setting(2, range=(1, None), help="heavy requests (expand, list predict, fill) running at once")
    heavy_queue: int = setting(32, range=(0, 1 << 16), help="heavy requests waiting; one more is a 503 with Retry-After")
    max_head_bytes: int = setting(16 * 1024, range=(1024, 1 << 20), help=(
        "bytes of a request line and headers (uvicorn's h11 limit); a longer head is a 400"))
    max_connections: int = setting(1024, range=(1, 1 << 20), help=(
        "open connections and requests beyond which the server answers 503"))

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
