"""The retrieval benchmark's span metrics on cases worked out by hand: its figures are only as right as these."""

import pytest

from pipelines.evaluation.metrics import Span, covered, score, within_budget

GOLD = Span(doc=0, start=100, end=200)  # 100 characters


def test_covered_counts_distinct_gold_characters_once() -> None:
    # [50, 130) covers 100..130 (30), [120, 150) adds 130..150 (20), [190, 260) adds 190..200 (10)
    retrieved = [Span(0, 50, 130), Span(0, 120, 150), Span(0, 190, 260)]
    assert covered(GOLD, retrieved) == 60


def test_covered_ignores_other_documents_and_spans_that_only_touch() -> None:
    assert covered(GOLD, [Span(1, 100, 200), Span(0, 0, 100), Span(0, 200, 300)]) == 0


def test_scores_of_a_chunk_inside_the_gold_span() -> None:
    got = score(GOLD, [Span(0, 120, 170)])  # 50 of 100 gold characters, all 50 retrieved ones gold
    assert (got.recall, got.precision, got.iou) == (0.5, 1.0, 0.5)


def test_scores_count_overlap_as_retrieved_twice() -> None:
    # two chunks of 80 overlapping by 40 on [100, 220): covered 100, retrieved 160, union 100 + 160 - 100
    got = score(GOLD, [Span(0, 100, 180), Span(0, 140, 220)])
    assert got.recall == 1.0
    assert got.precision == pytest.approx(100 / 160)
    assert got.iou == pytest.approx(100 / 160)


def test_scores_with_a_miss_in_another_document() -> None:
    # 25 gold characters covered; 50 + 150 retrieved; IoU 25 / (100 + 200 - 25)
    got = score(GOLD, [Span(0, 175, 225), Span(3, 0, 150)])
    assert got.recall == 0.25
    assert got.precision == pytest.approx(25 / 200)
    assert got.iou == pytest.approx(25 / 275)


def test_empty_retrieval_scores_zero() -> None:
    assert score(GOLD, []) == score(GOLD, [Span(2, 0, 10)]) == type(score(GOLD, []))(0.0, 0.0, 0.0)


def test_budget_takes_whole_chunks_then_cuts_the_next_one_at_its_start() -> None:
    ranked = [Span(0, 0, 400), Span(1, 50, 450), Span(0, 100, 900), Span(2, 0, 10)]
    taken = within_budget(ranked, 1000)
    assert taken == [Span(0, 0, 400), Span(1, 50, 450), Span(0, 100, 300)]
    assert sum(map(len, taken)) == 1000


def test_budget_larger_than_everything_takes_everything() -> None:
    ranked = [Span(0, 0, 10), Span(0, 5, 25)]
    assert within_budget(ranked, 4000) == ranked


def test_recall_at_budget_sees_only_the_kept_beginning_of_a_cut_chunk() -> None:
    # the second chunk [0, 500) is cut to [0, 150): it covers only gold 100..150, not all of it
    taken = within_budget([Span(5, 0, 850), Span(0, 0, 500)], 1000)
    assert score(GOLD, taken).recall == 0.5


def test_bad_spans_and_budgets_are_refused() -> None:
    with pytest.raises(ValueError, match="start <= end"):
        Span(0, 10, 5)
    with pytest.raises(ValueError, match="budget"):
        within_budget([], -1)
