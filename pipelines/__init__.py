"""pipelines: the Apache Beam side of zerda (reading corpora, chunking, writing Parquet).

Importing any module of it changes nothing process-wide (logging, ``sys.excepthook``): zerda's own
commands install their hooks as they start (``pipelines.redact.install``, called by the rechunk and
report commands and by the DirectRunner's worker processes' ``sitecustomize``).
"""
