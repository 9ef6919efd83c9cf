"""The names zerda's transforms share: tagged outputs and the Beam metrics namespace.

One set, so a transform's tag and the step that reads it can never drift apart, and every counter
(``records_read``, ``rejects_<reason>``, ``chunks_bucket_<K>``, ...) lands in one namespace.
"""

RECORDS = "records"  # ReadCorpus's main output: SourceRecords
REJECTS = "rejects"  # every transform's tagged output of Reject records
FILES = "files"  # ReadCorpus: one FileReport a file
SUMMARIES = "summaries"  # ChunkDocuments: one summary a chunked document, for the manifest
METRICS_NAMESPACE = "zerda"
