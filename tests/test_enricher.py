"""MetadataEnricher: TF-IDF keywords per chunk, deterministic, English and Arabic stop words."""

from __future__ import annotations

import pytest

from zerda_core.chunks import AdaptiveChunker, ChunkConfig
from zerda_core.enrich import MetadataEnricher

FOX = "The fennec fox sleeps in the desert sand. Its large ears shed heat at night. " * 6
BEAM = "Beam pipelines write Parquet files partitioned by density bucket. " * 6
ARABIC = "يعيش الثعلب في الصحراء الكبرى ويحفر جحره تحت الرمال الذهبية. " * 6


def chunks_of(text: str, doc_id: str = "d"):
    chunker = AdaptiveChunker(ChunkConfig(min_size=300, max_size=300, overlap=0))
    return chunker.chunk(text, doc_id=doc_id, source="s")


def test_keywords_mark_out_each_chunk() -> None:
    chunks = MetadataEnricher(top_k=3).enrich(chunks_of(FOX + BEAM))
    first, last = chunks[0].metadata.extra["keywords"], chunks[-1].metadata.extra["keywords"]
    assert len(first) == 3
    assert {t for t, _ in first} <= {"fennec", "fox", "sleeps", "desert", "sand", "large", "ears", "shed", "heat"}
    assert {t for t, _ in last} & {"beam", "pipelines", "parquet", "partitioned", "density", "bucket", "files"}
    scores = [s for _, s in first]
    assert scores == sorted(scores, reverse=True)


def test_stop_words_are_never_keywords() -> None:
    chunks = MetadataEnricher(top_k=20).enrich(chunks_of(FOX + ARABIC))
    terms = {t for c in chunks for t, _ in c.metadata.extra["keywords"]}
    assert not terms & {"the", "its", "at", "in", "في", "تحت"}
    assert {"الثعلب", "الصحراء"} <= terms


def test_enrichment_is_deterministic_and_per_document() -> None:
    one = MetadataEnricher().enrich(chunks_of(FOX + BEAM, "a") + chunks_of(FOX, "b"))
    two = MetadataEnricher().enrich(chunks_of(FOX + BEAM, "a") + chunks_of(FOX, "b"))
    assert [c.metadata.extra["keywords"] for c in one] == [c.metadata.extra["keywords"] for c in two]
    alone = MetadataEnricher().enrich(chunks_of(FOX, "b"))
    assert [c.metadata.extra["keywords"] for c in one if c.metadata.doc_id == "b"] == [
        c.metadata.extra["keywords"] for c in alone
    ]


def test_chunk_without_words_gets_empty_keywords() -> None:
    chunker = AdaptiveChunker(ChunkConfig(min_chunk_size=1))
    chunks = MetadataEnricher().enrich(chunker.chunk("1234 5678 == 42 ;; {} []"))
    assert chunks[0].metadata.extra["keywords"] == []


@pytest.mark.parametrize("kwargs", [{"top_k": 0}, {"min_length": 0}])
def test_invalid_settings(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        MetadataEnricher(**kwargs)


def test_code_and_url_noise_is_never_a_keyword() -> None:
    code = (
        "class Loader:\n    def load(self, path):\n        self.path = path\n        return None\n"
        "# docs at https://www.example.com/loader.html and http://mirror.example.org/loader\n"
    ) * 6
    chunks = MetadataEnricher(top_k=50).enrich(chunks_of(code))
    terms = {t for c in chunks for t, _ in c.metadata.extra["keywords"]}
    assert not terms & {"self", "def", "return", "none", "http", "https", "www", "com", "org", "html"}
    assert {"loader", "load", "path", "example"} <= terms


def test_top_terms_are_the_best_scored_of_all() -> None:
    """Only the top_k are kept, and they are exactly the first top_k of the full ranking."""
    text = FOX + BEAM + ARABIC
    full = MetadataEnricher(top_k=1000).enrich(chunks_of(text))
    top = MetadataEnricher(top_k=4).enrich(chunks_of(text))
    for whole, best in zip(full, top, strict=True):
        assert best.metadata.extra["keywords"] == whole.metadata.extra["keywords"][:4]
