"""Reading corpora from any fsspec filesystem and writing the chunk dataset."""
