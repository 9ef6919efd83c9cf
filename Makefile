# Everyday commands. Everything runs in ./.venv, made from nothing but python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install run test bench lint clean

# `make run` installs what running needs (zerda and its core packages); `make test` adds the test,
# lint and example extras on top. Each step leaves a marker, remade when setup.py changes.
install: $(VENV)/.installed

# uv installs the same versions as pip in a fraction of the time. --compile-bytecode as pip does: without
# .pyc files (and with PYTHONDONTWRITEBYTECODE set) every process would compile Beam again.
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

# `make test`: the Debian packages the tests need (installed when missing), then the tests outside the
# Flink cluster on TEST_WORKERS pytest-xdist workers (each worker has its own moto server and fixtures; idle
# workers steal queued tests), then the Flink tests alone and serially. Three workers on two cores: several
# tests mostly wait (S3 back-off, signals, worker processes starting), and a third worker fills those waits.
TEST_WORKERS ?= 3
test: $(VENV)/.test-installed
	tests/system_packages.sh
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
	$(BIN)/python benchmarks/bench_memory.py --docs 250000,1000000 --files 200
	$(BIN)/python benchmarks/bench_memory.py --docs 2500000,10000000 --docs-per-file 1250 \
		--results benchmarks/results/incremental_memory_more_files.md
	$(BIN)/python benchmarks/bench_memory.py --runner flink --docs 625000,2500000 --docs-per-file 1250 --launch-probes 0
	$(BIN)/python benchmarks/bench_commit.py --files 2000
	$(BIN)/python benchmarks/bench_table.py --mb 400 --files 64 --reps 3
	$(BIN)/python benchmarks/bench_split.py --mb 400

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy zerda_core pipelines

clean:
	rm -rf $(VENV) out build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
