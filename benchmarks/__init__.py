"""Benchmarks for zerda; a package so that ``python -m benchmarks.bench_chunker`` works from the repo root."""
