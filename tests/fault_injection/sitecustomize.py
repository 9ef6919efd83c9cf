"""Worker processes started with this folder on PYTHONPATH install zerda's test fault (see zerda_fault)."""

import zerda_fault

zerda_fault.install()
