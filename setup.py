"""Packaging for zerda; Dataflow ships this file with ``--setup_file ./setup.py``."""

import re
from pathlib import Path

from setuptools import find_namespace_packages, setup

HERE = Path(__file__).parent

CORE = [
    "apache-beam>=2.77,<2.79",  # the versions the test suite has passed on: a new Beam release is tried first
    "pyarrow>=15",
    "numpy>=1.24",  # the chunker classifies characters in arrays (apache-beam needs numpy too)
    "fsspec>=2024.2",
    "smart-open[zst]>=7",
    "pyyaml>=6",
    "zstandard>=0.22",
    "psutil>=5.9",  # the launcher ends its worker processes on Ctrl-C
]

EXTRAS = {
    "s3": ["s3fs>=2024.2"],  # fsspec reads and writes s3:// (zerda itself never imports boto3)
    "gcs": ["gcsfs>=2024.2"],
    "azure": ["adlfs>=2024.2"],
    # --output iceberg://NAMESPACE.TABLE (pipelines.output.iceberg): SQLite and PostgreSQL catalogs out of the box
    "iceberg": ["pyiceberg[sql-sqlite,sql-postgres]>=0.12"],
    "dev": [
        "setuptools>=70.1",
        "hatchling>=1.21",  # builds the zerda-core distribution (packaging/zerda-core) in a test
        "pytest>=8",
        "pytest-xdist>=3.5",
        # the Flink tests run once more when the cluster's SDK harness drops its connection (only then)
        "pytest-rerunfailures>=14",
        "hypothesis>=6.100",
        "duckdb>=1.0",
        # the Iceberg output's tests: pyiceberg, and DuckDB's iceberg extension from PyPI (it needs avro; both
        # pin the duckdb version they are built for, so no extension is downloaded at run time)
        "pyiceberg[sql-sqlite,sql-postgres]>=0.12",
        "duckdb-extension-iceberg",
        "duckdb-extension-avro",
        "polars>=1.0",
        "s3fs>=2024.2",
        "moto[server]>=5",  # brings boto3, at a version whose botocore s3fs's aiobotocore accepts
        "psutil>=5.9",
        "ruff>=0.6",
        "mypy>=1.10",
        "types-PyYAML",
        "wordllama>=0.4",  # also ships the tokenizer.json the token-size tests use
        "tokenizers>=0.20",
        # zerda-eval's tests: BM25 and the peer splitters it compares zerda with
        "bm25s>=0.2",
        "chonkie>=1.0",
        "semchunk>=2",
        "langchain-text-splitters>=0.3",
    ],
    "tokens": ["tokenizers>=0.20"],
    "rag": ["wordllama>=0.4"],
    "eval": ["bm25s>=0.2", "wordllama>=0.4"],  # zerda-eval's retrievers
    "bench": [
        "chonkie>=1.0",
        "semchunk>=2",
        "langchain-text-splitters>=0.3",
        "psutil>=5.9",
        "bm25s>=0.2",
        "wordllama>=0.4",
    ],
}
# One version source: zerda_core's __version__, which the CLIs print and the manifest records.
_VERSION_LINE = re.search(r'^__version__ = "([^"]+)"', (HERE / "zerda_core" / "__init__.py").read_text(), re.M)
assert _VERSION_LINE, "zerda_core/__init__.py sets no __version__"
VERSION = _VERSION_LINE[1]

# Everything a run can use (storage, tokenizers, embeddings), not the tools that build and test zerda.
EXTRAS["all"] = sorted({req for name in ("s3", "gcs", "azure", "iceberg", "tokens", "rag") for req in EXTRAS[name]})

setup(
    name="zerda",
    version=VERSION,
    description="Density-adaptive re-chunking of text corpora for retrieval, as an Apache Beam pipeline.",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    # namespace discovery: the sample corpus folders are data, found as packages without an __init__.py
    packages=find_namespace_packages(include=["zerda_core", "zerda_core.*", "pipelines", "pipelines.*"]),
    package_data={"zerda_core": ["py.typed"], "pipelines": ["py.typed", "sample_corpus/*", "sample_corpus/**/*"]},
    include_package_data=True,
    install_requires=CORE,
    extras_require=EXTRAS,
    entry_points={
        "console_scripts": [
            "zerda-rechunk=pipelines.cli.rechunk:cli",
            "zerda-report=pipelines.report.cli:cli",
            "zerda-eval=pipelines.evaluation.cli:cli",
        ]
    },
)
