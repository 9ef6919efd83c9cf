"""pipelines: the Apache Beam side of zerda (reading corpora, chunking, writing Parquet)."""
