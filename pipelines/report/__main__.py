"""``python -m pipelines.report``."""

import sys

from pipelines.report.cli import main

sys.exit(main())
