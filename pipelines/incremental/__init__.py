"""Incremental runs: unchanged documents keep their chunk rows, and downstream learns what changed.

Every run writes a document index, ``OUTPUT/_index/part-*.pq`` (``INDEX_SCHEMA``: source, record, doc id,
a blake2b hash of the text as chunked, the settings fingerprint, the zerda version, chunk count, bucket,
the manifest's character counts, the chunk ids and the chunk file holding the document's rows), the id
counts ``OUTPUT/_ids/part-*.pq`` (``IDS_SCHEMA``: how many documents hold each id, partitioned by id, for the
manifest's duplicate ids) and ``OUTPUT/_changes/part-*.pq``: the chunk ids this run added and removed against
the previous committed output (``CHANGES_SCHEMA``).

The index is partitioned by source (:func:`partition_of`): ``_index/part-J-of-P.pq`` holds the documents of
the sources in partition J of P, sorted by source, so one source's rows are a few row groups of one file.

With ``--incremental``, :func:`read_previous` (at launch, before anything is written) decides from the
previous output's ``_SUCCESS``, manifest and index whether its rows can be reused: the same settings
fingerprint and zerda version, else the run is a full one and says why. Then::

    records ─► Classify (the previous index slice of each source met) ─┬─► unchanged: rows stay; totals
                                                                       └─► new or changed: ChunkDocuments ─►
                                          WriteChunks ─► files, and an index row per document naming its file
    partitions, unread sources ┐
    hashes in batches, rows ───┴─► CoGroupByKey per partition ─► ComparePartition (reads that partition of the
          previous index) ─► its index file, change rows and counts, (chunk file, key) of each row leaving its file
    leaving rows ─► GroupByKey per chunk file ─► CarryRows: that file without them, under its own name
    previous chunk files ─► KeepUntouched: the others, kept where they are, unread
    id partitions, ids changed ─► CoGroupByKey per id partition ─► CountIds (adds them to that partition's
          previous counts) ─► its id counts file, the duplicated ids

An input file listed with the stamp the previous run recorded in its manifest's ``inputs`` (path, size,
times and inode or ETag: ``pipelines.input.expand.file_stamp``) is not read at all (judged on the workers, where
the inputs are matched: ``pipelines.input.match.JudgeInputs``):
``_CarryFiles`` gives, from the previous index and rejects, its documents' totals (one element a file), its
rejects and its previous report; its index rows are carried by its partition's comparison, and its ids are in
the previous id counts: only the ids of the sources read, before and now, are sent to be counted.

A document is keyed on (source, record, doc id): two copies of one id in different files stay distinct.
Changes are found per (source, doc id), all the documents that can share a chunk id. What is shuffled is
this run's keys, hashes and chunk ids, never texts or previous index rows; a worker holds a few sources'
slices of the previous index, a comparing task one partition (about ``_DOCUMENTS_PER_PARTITION`` documents).
The previous files are only read, and stay committed and readable until the commit replaces the dataset,
so a failed or killed run leaves them whole.
"""
