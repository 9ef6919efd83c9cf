"""zerda_core: density-adaptive text chunking, usable without Beam."""

__version__ = "0.2.2"
