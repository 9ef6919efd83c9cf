"""Reading corpora from any fsspec filesystem: matching, splitting and parsing files into records."""
