# Everyday commands. Everything runs in ./.venv, made from nothing but python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install run test bench lint clean

install: $(VENV)/.installed

$(VENV)/.installed: setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev,s3]"
	touch $@

$(VENV)/.bench-installed: $(VENV)/.installed
	$(BIN)/pip install --quiet -e ".[dev,s3,bench]"
	touch $@

run: install  ## chunk the bundled sample corpus into ./out/chunks
	$(BIN)/python -m pipelines.rechunk

test: install
	$(BIN)/python -m pytest -q

bench: $(VENV)/.bench-installed
	$(BIN)/python benchmarks/bench_chunker.py
	$(BIN)/python benchmarks/bench_pipeline.py --mb 400 --files 64 --reps 3 --small-reps 2

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy zerda_core pipelines

clean:
	rm -rf $(VENV) out build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
