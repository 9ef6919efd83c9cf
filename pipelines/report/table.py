"""``zerda-report iceberg://NAMESPACE.TABLE``: the report of a table snapshot, and its orphan files.

The catalog is the one a run into the table uses (``output.catalog`` of ``--config``, the environment's
``PYICEBERG_CATALOG__<NAME>__<KEY>``, ``~/.pyiceberg.yaml``; none: the SQLite catalog in ``out/warehouse``).
The report reads the snapshot's manifest (its summary's ``zerda.manifest``), its data files and the rejects
table's snapshot of the same run, as a directory's report reads ``_manifest.json``, its chunk files and
``_rejects/``. Beam and pyiceberg are imported only here, when a table is reported.
"""

from __future__ import annotations

import json
from typing import Any

from fsspec.core import url_to_fs

from pipelines.errors import OutputError, SettingsError, UsageError
from pipelines.output.layout import TABLE_SCHEME
from pipelines.output.manifest import Manifest
from pipelines.report.model import Report
from pipelines.report.scan import build_report, reading_output


def is_table(output: str) -> bool:
    return output.startswith(TABLE_SCHEME)


def _target(output: str, config: str | None) -> Any:
    """The table's :class:`~pipelines.output.iceberg.TableTarget`, loaded, never created: OutputError if the
    name, the settings or the catalog are wrong, or the table is missing."""
    from pipelines.output.iceberg import open_table, table_name
    from pipelines.settings import load_settings

    try:
        name = table_name(output, None)
        settings = load_settings(config)
    except (UsageError, SettingsError) as err:
        raise OutputError(str(err)) from err
    assert name is not None
    return open_table(name, settings.output.catalog, create=False)


def load_table_report(output: str, config: str | None = None, snapshot_id: int | None = None) -> Report:
    """The report of the table's current snapshot, or of ``snapshot_id``: OutputError (one line) if there is
    none, or it is not a zerda run's."""
    from pipelines.output.iceberg import MANIFEST_KEY, REJECTS_SNAPSHOT_KEY

    target = _target(output, config)
    with reading_output(output):
        catalog = target.catalog()
        table = catalog.load_table(target.name)
        snapshot = table.current_snapshot() if snapshot_id is None else table.snapshot_by_id(snapshot_id)
        if snapshot is None:
            which = "no snapshot" if snapshot_id is None else f"no snapshot {snapshot_id}"
            raise OutputError(f"Iceberg table {target.name!r} has {which}: nothing to report")
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        if MANIFEST_KEY not in summary:
            raise OutputError(
                f"snapshot {snapshot.snapshot_id} of Iceberg table {target.name!r} is not a zerda run's "
                "(no zerda.manifest in its summary): nothing to report"
            )
        manifest = Manifest(json.loads(summary[MANIFEST_KEY]))
        rejects = catalog.load_table(target.rejects_name)
        rejects_id = summary.get(REJECTS_SNAPSHOT_KEY)
        reject_files = (
            _files(rejects, int(rejects_id)) if rejects_id and rejects.snapshot_by_id(int(rejects_id)) else []
        )
        fs, _ = url_to_fs(target.chunks_location)
        chunk_files = _files(table, snapshot.snapshot_id)
        return build_report(f"{target.url} (snapshot {snapshot.snapshot_id})", manifest, fs, chunk_files, reject_files)


def _files(table: Any, snapshot_id: int) -> list[str]:
    """The paths (without protocol, as the filesystem takes them) of the data files of a snapshot."""
    return sorted(url_to_fs(task.file.file_path)[1] for task in table.scan(snapshot_id=snapshot_id).plan_files())


def orphans_text(output: str, config: str | None, older_than_hours: float, remove: bool) -> str:
    """``--orphans``: the files runs wrote into the table's folders that no snapshot names
    (:func:`~pipelines.output.iceberg.orphan_files`), one a line, and a last line saying how many, of which
    runs; with ``remove``, deleted first."""
    from pipelines.output.iceberg import orphan_files, remove_orphans
    from pipelines.redact import redact_url

    target = _target(output, config)
    with reading_output(output):
        orphans = orphan_files(target, older_than_hours)
        if remove:
            remove_orphans(orphans)
    runs = len({o.run_id for o in orphans})
    done = "removed" if remove else "kept (--remove deletes them)"
    lines = [redact_url(o.url) for o in orphans]
    lines.append(
        f"{len(orphans)} file(s) of {runs} run(s) started more than {older_than_hours:g} hour(s) ago that no snapshot "
        f"of {target.name} names: {done}"
    )
    return "\n".join(lines) + "\n"
