"""``zerda-eval``: how well a corpus's chunks retrieve the answers to the user's own questions.

:mod:`.questions` reads the questions and locates their gold spans, :mod:`.splitters` cuts the corpus
(zerda settings and peer splitters), :mod:`.retrievers` ranks chunks, :mod:`.metrics` scores the ranked
spans, :mod:`.evaluate` ties them together, :mod:`.report` writes the table, JSON and HTML page, and
:mod:`.cli` is the command. ``benchmarks/bench_retrieval.py`` runs on the same code.
"""
