# superbloom serve in a CPU container (docs/deploy.md; tests/test_docker.py builds and runs it where Docker works).
#
#   docker build -t superbloom .
#   docker run --rm -p 8000:8000 -v "$PWD/runs/wiki/model:/model:ro" superbloom
#   docker run --rm -p 8000:8000 -v "$PWD/runs/wiki/model:/model:ro" superbloom /model --host 0.0.0.0 --workers 2
#
# The model directory is a volume (/model, read-only is enough); the server runs as an unprivileged
# user, answers on port 8000 and logs to stderr (one JSON line per request). HEALTHCHECK asks GET /live;
# an orchestrator's readiness probe should ask GET /ready (503 until the model is warm).
#
# torch comes first, pinned, in a layer of its own. TORCH_INDEX_URL: a pip index to take it from; give
# PyTorch's CPU-only wheel index (the one its install selector shows for Linux / pip / CPU) for a
# CPU-only image a few GB smaller; left empty, pip's default index is used.
FROM python:3.11-slim

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=""

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN pip install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "torch==${TORCH_VERSION}"

WORKDIR /src
COPY pyproject.toml README.md LICENSE NOTICE ./
COPY superbloom ./superbloom
RUN pip install ".[serve]" && rm -rf /src

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin superbloom
USER superbloom
WORKDIR /home/superbloom

VOLUME ["/model"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/live', timeout=4)"]

ENTRYPOINT ["superbloom", "serve"]
CMD ["/model", "--host", "0.0.0.0", "--port", "8000"]
