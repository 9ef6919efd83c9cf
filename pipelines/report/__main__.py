"""``python -m pipelines.report``."""

from pipelines.report.cli import cli

cli()
