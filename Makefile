# Everyday commands. Everything runs in ./.venv, made from nothing but python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install run test bench lint clean

# `make run` installs what running needs (zerda and its core packages); `make test` adds the test,
# lint and example extras on top. Each step leaves a marker, remade when setup.py changes.
install: $(VENV)/.installed

# uv installs the same versions as pip (checked: the same 124 packages) in a fraction of the time: from warm
# caches on 2026-12-04, zerda and its core 6 s against pip's 21 s, the test extras 13 s against 51 s.
# --compile-bytecode as pip does: without .pyc files (and with PYTHONDONTWRITEBYTECODE set, as on this
# machine) every process compiles Beam again, and the non-Flink tests took 371 s instead of 197-203 s.
UV := $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python

$(VENV)/.installed: setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv
	$(UV) -e .
	touch $@

$(VENV)/.test-installed: $(VENV)/.installed
	$(UV) -e ".[dev,s3]"
	touch $@

$(VENV)/.bench-installed: $(VENV)/.test-installed
	$(UV) -e ".[dev,s3,bench]"
	touch $@

run: install  ## chunk the bundled sample corpus into ./out/chunks
	$(BIN)/zerda-rechunk

# `make test`: the tests outside the Flink cluster on TEST_WORKERS pytest-xdist workers (each worker has
# its own moto server and fixtures; idle workers steal queued tests), then the Flink tests alone and serially.
# 3 workers on the 2-core test machine: several tests wait (S3 back-off, signals, worker processes
# starting), and a third worker fills those waits. Whole non-Flink suite on a quiet machine, 2026-12-04,
# in a clean clone (.ci/run): -n 3 203 s wall (that morning, before the tests shared their finished outputs
# and exits got cheaper: -n 3 227-229 s, 425 CPU-s; -n 2 258 s, 405 CPU-s).
TEST_WORKERS ?= 3
test: $(VENV)/.test-installed
	$(BIN)/python -m pytest -q -m "not flink" -n $(TEST_WORKERS) --dist worksteal
	$(BIN)/python -m pytest -q -m flink

bench: $(VENV)/.bench-installed
	$(BIN)/python benchmarks/bench_chunker.py
	$(BIN)/python benchmarks/bench_keywords.py
	$(BIN)/python benchmarks/bench_tokens.py
	$(BIN)/python benchmarks/bench_retrieval.py
	$(BIN)/python benchmarks/bench_pipeline.py --mb 400 --files 64 --reps 3 --small-reps 2
	$(BIN)/python benchmarks/bench_incremental.py --mb 200 --files 32
	$(BIN)/python benchmarks/bench_incremental.py --mb 200 --files 32 --shares 0,0.01 --workers 1 \
		--results benchmarks/results/incremental_in_memory.md
	$(BIN)/python benchmarks/bench_commit.py --files 10000
	$(BIN)/python benchmarks/bench_split.py --mb 400

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy zerda_core pipelines

clean:
	rm -rf $(VENV) out build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
