"""The order of the tests on pytest-xdist workers: the slow modules first, so that no long test starts last.

``make test`` runs with ``--dist worksteal``: the controller hands each of the N workers a contiguous
share of the collected list (by count), and an idle worker steals the tail of the longest queue. In
collection order the longest tests sat anywhere, a 15 s one could start in the last seconds. Here, on
xdist workers only (a plain ``pytest`` run keeps its order), the modules are reordered so that each share
starts with its part of the slow modules, heaviest first, and ends with fast tests that are cheap to
steal. A module's tests stay together and in their order, so that a module-scoped fixture is set up
once per worker (reordered within their module, the two tests of the 200 MB run were stolen apart and
the 200 MB document chunked twice).

The weights below are seconds per test item (setup included; the longest item of a parametrized test) on
the 2-core test machine, measured with ``-n 3`` on 2026-12-04 while another job's benchmarks loaded it
(load average 3.4-4.7: about 1.5 times a quiet machine's times, which only scales them); tests not listed
(under 3 s) weigh ``DEFAULT_SECONDS``. They only order the run: a stale weight costs some seconds of wall
time, never a test. Refresh them from ``pytest -n 3 --dist worksteal --durations=0``.
"""

from __future__ import annotations

import pytest

DEFAULT_SECONDS = 0.2
SECONDS = {
    "test_reliability_input.py::test_200mb_document_is_chunked_within_the_size_bound": 47,
    "test_reliability_faults.py::test_s3_errors_and_slow_answers_are_retried_and_the_output_is_complete": 40,
    "test_reliability_faults.py::test_killed_job_leaves_no_success_and_the_next_run_is_complete_and_clean": 35,
    "test_reliability_faults.py::test_s3_down_fails_the_job_clearly_without_success": 25,
    "test_reliability_faults.py::test_same_rows_in_any_order_of_files_and_with_one_or_two_workers": 24,
    "test_incremental.py::test_incremental_run_equals_a_full_run_and_lists_the_changes": 24,
    "test_incremental.py::test_unchanged_files_are_not_read_and_give_the_rows_rejects_and_counts_of_a_full_run": 23,
    "test_reliability_faults.py::test_worker_failure_fails_the_job_and_the_retried_job_has_every_chunk_once": 21,
    "test_rechunk.py::test_multi_processing_rerun_replaces_output_with_identical_rows": 18,
    "test_iceberg.py::test_concurrent_runs_end_as_whole_snapshots_or_exit_2_naming_the_conflict": 14,
    "test_iceberg.py::test_a_locked_catalog_at_launch_exits_2_with_one_line": 14,
    "test_iceberg.py::test_a_catalog_locked_at_commit_fails_the_run_with_one_line_and_keeps_the_previous_snapshot": 13,
    "test_iceberg.py::test_a_killed_run_leaves_the_table_at_its_previous_snapshot": 9,
    "test_iceberg_s3.py::test_a_table_with_its_warehouse_on_s3": 5,
    "test_iceberg.py::test_worker_processes_write_the_table_as_one_process_does": 5,
    "test_iceberg.py::test_ctrl_c_while_the_workers_write_leaves_the_previous_snapshot_and_deletes_the_runs_files": 4,
    "test_hostile_input.py::test_storage_credentials_stay_out_of_verbose_logs_of_launcher_and_workers": 18,
    "test_incremental.py::test_a_chunk_file_of_unchanged_files_only_stays_where_it_is": 15,
    "test_portable.py::test_sigterm_to_the_launcher_cancels_the_job_on_the_job_service": 14,
    "test_incremental.py::test_a_file_changed_behind_its_times_or_seen_from_another_root_is_read": 14,
    "test_s3.py::test_s3_rerun_in_worker_processes_replaces_the_previous_dataset": 14,
    "test_split.py::test_split_job_gives_the_rows_of_the_unsplit_job": 11,
    "test_incremental.py::test_incremental_on_s3": 10,
    "test_split.py::test_two_worker_processes_both_chunk_one_split_file": 10,
    "test_portable.py::test_job_service_process_with_external_worker_pool": 9,
    "test_tokens.py::test_a_document_longer_than_one_tokenizer_window": 8,
    "test_rechunk.py::test_worker_processes_log_like_the_launcher": 8,
    "test_hostile_input.py::test_lone_surrogates_are_invalid_utf8_rejects_through_the_cli_in_multi_processing": 8,
    "test_portable.py::test_embedded_job_service_with_loopback_workers": 7,
    "test_ownership.py::test_folder_markers_on_an_object_store_are_no_ones_files": 7,
    "test_reliability_ops.py::test_ctrl_c_or_sigterm_exits_in_one_line_and_takes_the_workers_with_it": 7,
    "test_rechunk.py::test_the_direct_runner_never_hands_the_job_to_prism": 7,
    "test_hostile_input.py::test_a_small_parquet_of_huge_rows_stays_in_bounded_memory": 7,
    "test_hostile_input.py::test_url_credentials_echoed_as_a_bucket_name_are_redacted": 7,
    "test_write.py::test_rerun_with_other_file_count_and_workers_leaves_nothing_stale": 7,
    "test_incremental.py::test_a_previous_output_missing_or_changed_files_runs_in_full_and_says_why": 7,
    "test_endpoints.py::test_an_endpoint_that_is_no_job_service_fails_the_run_in_one_line": 7,
    "test_incremental.py::test_two_files_redacted_to_one_source_are_read": 6,
    "test_tokens.py::test_an_incremental_run_after_switching_to_tokens_rechunks_everything": 5,
    "test_report.py::test_html_page_renders_in_headless_chromium": 5,
    "test_rechunk.py::test_section_density_scope_fills_local_density_and_markdown_chunks_their_section": 5,
    "test_rechunk.py::test_summary_tells_counts_buckets_and_how_to_query": 5,
    "test_rechunk.py::test_quiet_and_verbose": 5,
    "test_reliability_ops.py::test_a_full_disk_fails_the_run_and_keeps_the_previous_output": 5,
    "test_s3.py::test_s3_run_is_complete_and_accounted": 5,
    "test_reliability_faults.py::test_repeated_bundles_and_a_repeated_commit_double_nothing": 4,
    "test_rechunk.py::test_sample_run_is_complete_and_accounted": 4,
    "test_rechunk.py::test_a_run_without_rejects_writes_an_empty_rejects_file_the_documented_query_reads": 4,
    "test_rechunk.py::test_keywords_column_when_enrichment_is_on": 4,
    "test_rechunk.py::test_summary_counts_text_read_and_overlap": 4,
    "test_hostile_input.py::test_an_output_beside_the_input_is_not_read_back_by_a_rerun": 4,
    "test_reliability_ops.py::test_the_commit_checks_the_files_it_commits_before_success": 4,
    "test_reliability_ops.py::test_two_jobs_into_one_output_one_commits_the_other_refuses": 4,
    "test_incremental.py::test_duplicate_ids_in_two_files_stay_distinct": 4,
    "test_incremental.py::test_copies_of_one_id_in_one_file_change_only_what_the_dataset_gains_or_loses": 4,
    "test_incremental.py::test_a_settings_change_runs_in_full_and_says_why": 4,
    "test_incremental.py::test_a_failed_incremental_run_leaves_the_previous_output_whole": 4,
    "test_incremental.py::test_a_file_whose_document_failed_in_the_chunker_is_read_again": 4,
    "test_rag.py::test_chunks_in_mltransform_carry_zerdas_ids_and_metadata": 4,
    "test_rag.py::test_example_embeds_zerda_chunks_with_a_model_shipped_in_a_wheel": 4,
    "test_chunk_text.py::test_runs_on_worker_processes": 4,
    "test_endpoints.py::test_an_unreachable_endpoint_exits_2_at_launch_naming_it": 4,
    "test_ownership.py::test_a_foreign_file_put_there_during_the_run_fails_the_commit_before_it_changes_anything": 3,
    "test_packaging.py::test_console_script_help": 3,
    "test_endpoints.py::test_a_job_that_fails_on_its_workers_says_why_in_its_last_line": 3,
}


def _seconds(item: pytest.Item) -> float:
    key = item.nodeid.removeprefix("tests/").split("[", 1)[0]
    return SECONDS.get(key, DEFAULT_SECONDS)


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def slowest_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items`` reordered into ``workers`` shares of the sizes xdist deals out (``len // workers left``):
    the modules with a slow test spread over the shares by weight (largest first, to the lightest share),
    in each share the module of the longest test first; the other modules' items fill each share up.
    Within a module, the collection order."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(_module(item), []).append(item)
    slow = {name: group for name, group in modules.items() if max(map(_seconds, group)) > DEFAULT_SECONDS}
    fillers = [item for name, group in modules.items() if name not in slow for item in group]
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    placed: list[list[str]] = [[] for _ in range(workers)]
    for name in sorted(slow, key=lambda name: -sum(map(_seconds, slow[name]))):
        lightest = loads.index(min(loads))
        placed[lightest].append(name)
        loads[lightest] += sum(map(_seconds, slow[name]))
    for share, names in zip(shares, placed, strict=True):  # the module of the longest test first: run before
        for name in sorted(names, key=lambda name: -max(map(_seconds, slow[name]))):  # any steal can split it
            share += slow[name]  # in collection order: tests sharing a module fixture stay side by side
    ordered: list[pytest.Item] = []
    left = len(items)
    for index, share in enumerate(shares):
        size = left // (workers - index)  # what xdist sends this worker first
        take = max(0, size - len(share))
        ordered += share + fillers[:take]
        fillers = fillers[take:]
        left -= size
    return ordered + fillers


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected: the list the controller schedules
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workers = getattr(config, "workerinput", {}).get("workercount", 0)
    if workers > 1:
        items[:] = slowest_first(items, workers)
