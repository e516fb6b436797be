"""Crash injection: a writer process that kills itself with SIGKILL at a named step.

A timing-based kill ("SIGKILL after 300 ms") lands wherever the scheduler happens to be, so a
crash test built on it cannot say which step it tested. Here the child itself dies at an exact
point of the commit protocol, chosen by the environment variable ``HUDI_OCC_CRASH_AT``; SIGKILL
(not an exception) so that no ``finally``, no ``atexit`` and no lock release runs, exactly as
when the machine or the container dies.

The points (in protocol order)::

    after_requested     <t>.commit.requested exists; still inside begin(), table lock HELD,
                        heartbeat not started yet
    after_first_marker  the first marker exists, its data file does not
    mid_file            the first data file is half written (local: the hidden temporary copy
                        the atomic create writes first; S3: the PUT never completes)
    torn_file           a half-written data file under its final name (what a streaming
                        writer on HDFS-like storage leaves)
    after_all_files     every data file written, commit not started
    after_staged        (a batch with a key) the commit is staged (.hoodie/.aux/occ/staged/<t>.commit,
                        the pre-commit of core/recovery.py), table lock not yet taken: the
                        batch's retry re-commits this instant
    commit_lock_held    inside commit(): lock held, conflicts resolved, completed file not yet
                        written
    after_completed     <t>_<c>.commit exists (the commit IS visible), lock released, markers
                        and heartbeat not yet deleted

A merge-on-read deltacommit (the child writes with ``MergeOnReadWriter`` when the table is
MOR) dies at the same points; ``after_first_marker`` is then the (CREATE) marker of a log file
when the batch only updates stored keys, and two points belong to log files::

    mid_log_file        the first log file half written (its hidden temporary copy; a log file
                        is published by one atomic create, like a base file)
    torn_log_file       a half-written log file under its final name (what an appending writer
                        on HDFS-like storage leaves): readers must skip it, rollback delete it

Inside the removal of Hudi's metadata table (``hoodie.metadata.enable=false`` on a table that
has one; core/table/metadata_table.py), in begin(), table lock HELD, no instant created yet::

    mdt_after_backup      hoodie.properties.backup written, hoodie.properties not yet replaced
    mdt_after_properties  hoodie.properties replaced (metadata partitions cleared), backup and
                          the .hoodie/metadata folder still there
    mdt_mid_delete        part of the .hoodie/metadata folder deleted

Inside the metadata table's deltacommit that a write (a copy-on-write commit, a merge-on-read
deltacommit) writes with ``hoodie.occ.metadata.files.maintain=true``
(core/table/metadata_commit.py), in commit(), table lock HELD, the data instant inflight::

    mdt_files_after_log          the metadata table's log file written (staged before the lock:
                                 no metadata-table instant names it yet)
    mdt_files_after_deltacommit  the metadata table's deltacommit completed, the data instant not

The metadata table's steps of a clean and of a rollback (the child runs ``action="clean"`` or
``action="rollback"`` of ``instant`` instead of a write), table lock HELD::

    mdt_clean_after_deltacommit      the clean's files deleted and the metadata table's
                                     deltacommit of the clean completed; the clean not
    mdt_rollback_before_complete     the rollback of the metadata table's deltacommit of the
                                     rolled-back instant has deleted it (its completed file, its
                                     log files, its pending files); that rollback not completed
    mdt_rollback_after_complete      the metadata table's rollback completed; the data
                                     rollback not

Inside the metadata table's compaction our writer runs after such a commit (core/table/
metadata_compaction.py, core/commit/metadata_services.py), table lock HELD, the data instant
completed::

    mdt_compaction_after_base    the compaction's new base HFile written, its plan requested and
                                 inflight, the completed compaction instant not yet written
    mdt_clean_after_delete       the metadata table's clean (run before its compaction) has
                                 deleted the old slices' files, the clean not yet completed
    mdt_compaction_after_requested  the compaction's plan written (<c>.compaction.requested),
                                 not inflight, no base file yet
    mdt_compaction_after_inflight   the compaction inflight (its empty .compaction.inflight),
                                 no base file yet

Inside the metadata table's archival (core/commit/archival.py, the last of those services;
table lock HELD, the data instant completed)::

    mdt_archive_before_manifest  the metadata table's new LSM history file written, no manifest
                                 naming it yet (a file no reader looks at)
    mdt_archive_after_history    the archived instants written to the metadata table's LSM
                                 history (data file, manifest and _version_ published), their
                                 files not yet deleted from its active timeline
    mdt_archive_after_delete     the archived instants' files deleted from the active timeline,
                                 the history not yet compacted

The hooks wrap library functions from outside (nothing in ``core`` knows about crashes). Just
before dying the child prints one line ``HUDI_OCC_CRASH {"point": ..., "instant": ...}`` so the
test knows which instant died.

Run a child with :func:`run_writer` (a subprocess of ``python -m airflow_hudi_occ.testing.crash``).
"""

from __future__ import annotations

import functools
import json
import os
import posixpath
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from airflow_hudi_occ.core.job_protocol import RESULT_PREFIX, emit_result, parse_line

CRASH_ENV = "HUDI_OCC_CRASH_AT"
MARK = "HUDI_OCC_CRASH"

POINTS = ("after_requested", "after_first_marker", "mid_file", "torn_file", "after_all_files",
          "commit_lock_held", "after_completed")
#: the deltacommit matrix of a merge-on-read table (the batch updates stored keys: log files)
MOR_POINTS = ("after_requested", "after_first_marker", "mid_log_file", "torn_log_file",
              "after_all_files", "commit_lock_held", "after_completed")
#: points that exist only for a batch with a key (kept out of POINTS, the crash matrix)
RECOVERY_POINTS = ("after_staged",)
#: points inside the removal of a metadata table (kept out of POINTS: they need a table with one)
METADATA_TABLE_POINTS = ("mdt_after_backup", "mdt_after_properties", "mdt_mid_delete")
#: points inside the metadata table's deltacommit of a commit (they need a files-only one)
METADATA_COMMIT_POINTS = ("mdt_files_after_log", "mdt_files_after_deltacommit")
#: points inside a clean's and a rollback's metadata-table steps (children running those)
METADATA_CLEAN_POINTS = ("mdt_clean_after_deltacommit",)
METADATA_ROLLBACK_POINTS = ("mdt_rollback_before_complete", "mdt_rollback_after_complete")
#: points inside the metadata table's compaction (they need a files-only one and the trigger)
METADATA_COMPACTION_POINTS = ("mdt_compaction_after_base", "mdt_clean_after_delete",
                              "mdt_compaction_after_requested", "mdt_compaction_after_inflight")
#: points inside the metadata table's archival (they need a files-only one with keep limits met)
METADATA_ARCHIVAL_POINTS = ("mdt_archive_before_manifest", "mdt_archive_after_history", "mdt_archive_after_delete")
#: points at which the dying writer holds the table lock
LOCK_HELD_POINTS = frozenset({"after_requested", "commit_lock_held"})
#: points after which the write is committed (visible to readers)
COMMITTED_POINTS = frozenset({"after_completed"})

_state: dict[str, Any] = {}


def crash_now(point: str, **info: Any) -> None:
    """Print where we die, then SIGKILL ourselves (no cleanup of any kind runs)."""
    tx = _state.get("tx")
    rec = {"point": point, "instant": getattr(tx, "instant_time", None) if tx and tx.instant else
           info.pop("instant", None), "pid": os.getpid(), **info}
    sys.stdout.write(f"{MARK} {json.dumps(rec)}\n")
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def maybe_crash(point: str, **info: Any) -> None:
    if os.environ.get(CRASH_ENV) == point:
        crash_now(point, **info)


def _crash_after_metadata_deltacommit(module, point: str) -> None:
    """Kill the process right after ``module``'s call of ``write_metadata_deltacommit`` has
    completed the metadata table's deltacommit (before the data action completes)."""
    orig = module.write_metadata_deltacommit

    def write_metadata_deltacommit(table, instant_time, blocks, completion_time, *args, **kw):
        out = orig(table, instant_time, blocks, completion_time, *args, **kw)
        maybe_crash(point, instant=instant_time)
        return out
    module.write_metadata_deltacommit = write_metadata_deltacommit


def _crash_before_completing(module, action, point: str, key: str) -> None:
    """Kill the process when ``module`` is about to complete a metadata-table instant of
    ``action`` (its files written), reporting its time under ``key``."""
    orig = module.complete

    def complete(table, inst, completion_time, data, **kw):
        if inst.action is action:
            maybe_crash(point, **{key: inst.requested_time})
        return orig(table, inst, completion_time, data, **kw)
    module.complete = complete


def install(point: str | None = None) -> str | None:
    """Wrap the library so that the writer dies at ``point`` (default: ``$HUDI_OCC_CRASH_AT``)."""
    point = point or os.environ.get(CRASH_ENV)
    if not point:
        return None
    known = tuple(dict.fromkeys(POINTS + MOR_POINTS + RECOVERY_POINTS + METADATA_TABLE_POINTS
                                + METADATA_COMMIT_POINTS + METADATA_CLEAN_POINTS
                                + METADATA_ROLLBACK_POINTS + METADATA_COMPACTION_POINTS
                                + METADATA_ARCHIVAL_POINTS))
    if point not in known:
        raise ValueError(f"unknown crash point {point!r}; one of {known}")
    os.environ[CRASH_ENV] = point
    from airflow_hudi_occ.core.format import base_file
    from airflow_hudi_occ.core.format import storage
    from airflow_hudi_occ.core.commit import transaction
    from airflow_hudi_occ.core.commit import writer
    WT = transaction.WriteTransaction

    orig_begin = WT.begin

    @functools.wraps(orig_begin)
    def begin(self, *a, **kw):
        _state["tx"] = self
        return orig_begin(self, *a, **kw)
    WT.begin = begin

    if point == "after_requested":
        orig = transaction.create_requested

        def create_requested(table, inst, data=b""):
            orig(table, inst, data)
            maybe_crash("after_requested", instant=inst.requested_time)
        transaction.create_requested = create_requested

    elif point == "after_first_marker":
        orig_marker = WT.create_marker

        def create_marker(self, *a, **kw):
            out = orig_marker(self, *a, **kw)
            # which marker (of a base file or of a log file) the test asserts on
            maybe_crash("after_first_marker", marker=list(a[1:3]))
            return out
        WT.create_marker = create_marker

    elif point == "mid_file":
        orig_tmp = storage.local_tmp_copy
        orig_create = storage.Storage.create_if_absent

        def local_tmp_copy(path, data, *, fsync):
            if path.endswith(".parquet"):
                if callable(data):  # a streamed write: render it to cut it in half
                    import io
                    buf = io.BytesIO()
                    data(buf)
                    data = buf.getvalue()
                orig_tmp(path, data[: len(data) // 2], fsync=True)  # the real temp name
                maybe_crash("mid_file", path=path)
            return orig_tmp(path, data, fsync=fsync)

        def create_if_absent(self, path, data=b"", **kw):
            if not self.is_local and path.endswith(".parquet"):
                maybe_crash("mid_file", path=path)  # an object PUT that never completed
            return orig_create(self, path, data, **kw)
        storage.local_tmp_copy = local_tmp_copy
        storage.Storage.create_if_absent = create_if_absent

    elif point in ("mid_log_file", "torn_log_file"):
        orig_create = storage.Storage.create_if_absent
        orig_tmp = storage.local_tmp_copy

        def create_if_absent(self, path, data=b"", **kw):
            if ".log." in posixpath.basename(str(path)) and isinstance(data, (bytes, bytearray)) and data:
                half = bytes(data[: len(data) // 2])
                if point == "mid_log_file" and self.is_local:
                    orig_tmp(path, half, fsync=True)  # the real hidden temporary name
                elif point == "torn_log_file":
                    self.makedirs(posixpath.dirname(str(path)))
                    self.write(path, half)
                maybe_crash(point, path=str(path))  # (S3 mid_log_file: a PUT that never completed)
            return orig_create(self, path, data, **kw)
        storage.Storage.create_if_absent = create_if_absent

    elif point == "torn_file":
        orig_wp = base_file.write_parquet

        def write_parquet(store, relative_path, table, *args, **kw):
            import io

            import pyarrow.parquet as pq
            buf = io.BytesIO()
            pq.write_table(table, buf, compression="snappy")
            data = buf.getvalue()
            store.makedirs(os.path.dirname(store.path(relative_path)))
            store.write(store.path(relative_path), data[: len(data) // 2])
            maybe_crash("torn_file", path=relative_path)
            return orig_wp(store, relative_path, table, *args, **kw)

        def write_parquet_chunks(store, relative_path, chunks, *args, **kw):  # the chunked route
            import pyarrow as pa
            return write_parquet(store, relative_path, pa.concat_tables(list(chunks)), *args, **kw)
        writer.write_parquet = write_parquet
        writer.write_parquet_chunks = write_parquet_chunks

    elif point == "after_all_files":
        orig_commit = WT.commit

        def commit(self, *a, **kw):
            maybe_crash("after_all_files")
            return orig_commit(self, *a, **kw)
        WT.commit = commit

    elif point == "after_staged":
        orig_stage = transaction.stage_commit

        def stage_commit(table, tx, metadata):
            out = orig_stage(table, tx, metadata)
            maybe_crash("after_staged", files=[f["path"] for f in out.files])
            return out
        transaction.stage_commit = stage_commit

    elif point == "commit_lock_held":
        orig_complete = transaction.complete

        def complete(table, inst, completion_time, data, **kw):
            tx = _state.get("tx")
            held = tx.lock_manager.is_held() if tx is not None else None
            maybe_crash("commit_lock_held", lock_held=held)
            return orig_complete(table, inst, completion_time, data, **kw)
        transaction.complete = complete

    elif point == "after_completed":
        orig_cleanup = WT._cleanup_after_commit

        def _cleanup_after_commit(self, *also):
            maybe_crash("after_completed", completion_time=self.instant.completion_time)
            return orig_cleanup(self, *also)
        WT._cleanup_after_commit = _cleanup_after_commit

    elif point in ("mdt_after_backup", "mdt_after_properties"):
        orig_write = storage.Storage.write
        suffix = "/hoodie.properties.backup" if point == "mdt_after_backup" else "/hoodie.properties"

        def write(self, path, data):
            out = orig_write(self, path, data)
            if str(path).endswith(suffix):
                maybe_crash(point, instant="(none: in begin)")
            return out
        storage.Storage.write = write

    elif point == "mdt_files_after_log":
        orig_create = storage.Storage.create_if_absent

        def create_if_absent(self, path, data=b"", **kw):
            out = orig_create(self, path, data, **kw)
            if "/.hoodie/metadata/files/.files-0000-0_" in str(path):
                tx = _state.get("tx")
                maybe_crash(point, instant=tx.instant_time if tx is not None else None)
            return out
        storage.Storage.create_if_absent = create_if_absent

    elif point == "mdt_files_after_deltacommit":
        _crash_after_metadata_deltacommit(transaction, point)

    elif point == "mdt_compaction_after_base":
        from airflow_hudi_occ.core.format.instant import Action
        from airflow_hudi_occ.core.table import metadata_compaction
        # "compaction", not "instant": the instant of a crash record is the data instant's
        _crash_before_completing(metadata_compaction, Action.COMPACTION, point, "compaction")

    elif point in ("mdt_compaction_after_requested", "mdt_compaction_after_inflight"):
        from airflow_hudi_occ.core.format.instant import Action
        from airflow_hudi_occ.core.table import metadata_compaction
        name = "create_requested" if point == "mdt_compaction_after_requested" else "transition_to_inflight"
        orig_step = getattr(metadata_compaction, name)

        def step(table, inst, *a, **kw):
            out = orig_step(table, inst, *a, **kw)
            if inst.action is Action.COMPACTION:
                maybe_crash(point, compaction=inst.requested_time)
            return out
        setattr(metadata_compaction, name, step)

    elif point in METADATA_ARCHIVAL_POINTS:
        from airflow_hudi_occ.core.table.history import TimelineHistory

        def of_metadata_table(history) -> bool:
            return history.table.base_uri.rstrip("/").endswith("/.hoodie/metadata")
        if point == "mdt_archive_before_manifest":
            orig_write = storage.Storage.write

            def write(self, path, data):
                folder, name = posixpath.split(str(path))
                if folder.endswith("/.hoodie/metadata/.hoodie/timeline/history") and name.startswith("manifest_"):
                    maybe_crash(point, manifest=name)
                return orig_write(self, path, data)
            storage.Storage.write = write
        elif point == "mdt_archive_after_history":
            orig_append = TimelineHistory.append

            def append(self, instants):
                out = orig_append(self, instants)
                if of_metadata_table(self):
                    maybe_crash(point, history_file=out, archived=[i.instant_time for i in instants])
                return out
            TimelineHistory.append = append
        else:  # compaction of the history is the step after the deletes
            orig_compact = TimelineHistory.compact

            def compact(self, *a, **kw):
                if of_metadata_table(self):
                    maybe_crash(point)
                return orig_compact(self, *a, **kw)
            TimelineHistory.compact = compact

    elif point == "mdt_clean_after_delete":
        from airflow_hudi_occ.core.table import metadata_clean
        orig_delete_planned = metadata_clean.delete_planned_files

        def delete_planned_files(storage, files_by_partition, **kw):
            out = orig_delete_planned(storage, files_by_partition, **kw)
            maybe_crash(point, deleted=sorted(f for fs in out[0].values() for f in fs))
            return out
        metadata_clean.delete_planned_files = delete_planned_files

    elif point == "mdt_clean_after_deltacommit":
        from airflow_hudi_occ.core.services import clean
        _crash_after_metadata_deltacommit(clean, point)

    elif point == "mdt_rollback_before_complete":
        from airflow_hudi_occ.core.format.instant import Action
        from airflow_hudi_occ.core.table import metadata_commit
        _crash_before_completing(metadata_commit, Action.ROLLBACK, point, "instant")

    elif point == "mdt_rollback_after_complete":
        from airflow_hudi_occ.core.commit import rollback
        orig_mdt_rollback = rollback.rollback_metadata_deltacommit

        def rollback_metadata_deltacommit(table, instant_time, rollback_time, completion_time):
            out = orig_mdt_rollback(table, instant_time, rollback_time, completion_time)
            maybe_crash(point, instant=rollback_time, rolled_back=instant_time)
            return out
        rollback.rollback_metadata_deltacommit = rollback_metadata_deltacommit

    elif point == "mdt_mid_delete":
        orig_delete_dir = storage.Storage.delete_dir

        def delete_dir(self, path):
            if str(path).rstrip("/").endswith(".hoodie/metadata"):
                parts = sorted(self.list_dirs(path))
                orig_delete_dir(self, posixpath.join(path, parts[0]) if parts else path)  # one sub-folder
                maybe_crash("mdt_mid_delete", instant="(none: in begin)", deleted=parts[:1])
            return orig_delete_dir(self, path)
        storage.Storage.delete_dir = delete_dir
    return point


# -- the child ----------------------------------------------------------------------------------

def _child(job: dict) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.errors import HudiOccError
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.table.table import MERGE_ON_READ

    install()
    table = Table.open(job["table"], job.get("storage_options"))
    action = job.get("action", "write")
    if action in ("clean", "rollback"):
        config = WriteConfig.from_options(job["options"])
        try:
            if action == "clean":
                from airflow_hudi_occ.core.services.clean import run_clean
                out = run_clean(table, config).to_json()
            else:
                from airflow_hudi_occ.core.commit.rollback import rollback_instant
                out = rollback_instant(table, job["instant"], config, reason="crash child").to_json()
        except HudiOccError as e:
            emit_result({"outcome": "error", "error": e.to_dict()})
            return 2
        emit_result({"outcome": "done", **out})
        return 0
    cls = MergeOnReadWriter if table.config.table_type == MERGE_ON_READ else ArrowTableWriter
    w = cls(table, WriteConfig.from_options(job["options"]),
                         writer_id=job.get("writer_id", "crash-child"))
    try:
        # rows as JSON, or a parquet file for types JSON cannot carry (decimals, timestamps)
        data = (pq.read_table(job["rows_parquet"]) if job.get("rows_parquet")
                else pa.Table.from_pylist(job["rows"]))
        res = w.write(data, job.get("operation", "upsert"),
                      batch_key=job.get("batch_key"))
    except HudiOccError as e:
        emit_result({"outcome": "error", "error": e.to_dict()})
        return 2
    emit_result({"outcome": "committed", **res.to_json()})
    return 0


@dataclass
class ChildResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    def line(self, mark: str) -> dict | None:
        for ln in self.stdout.splitlines():
            if ln.startswith(mark + " "):
                return json.loads(ln[len(mark) + 1:])
        return None

    @property
    def crash(self) -> dict | None:
        return self.line(MARK)

    @property
    def result(self) -> dict | None:
        """The child's result line (the job protocol's, as the Spark job prints it)."""
        for ln in self.stdout.splitlines():
            if ln.startswith(RESULT_PREFIX):
                return parse_line(ln, RESULT_PREFIX)
        return None


def run_writer(table: str, options: dict, rows: list[dict], *, crash_at: str | None = None,
               storage_options: dict | None = None, timeout_s: float = 120,
               env: dict | None = None, **job: Any) -> ChildResult:
    """Run one upsert in a fresh Python process, dying at ``crash_at`` (None: no crash);
    ``action="clean"`` runs a clean instead, ``action="rollback"`` with ``instant=`` that
    instant's rollback."""
    payload = {"table": table, "options": options, "rows": rows,
               "storage_options": storage_options, **job}
    child_env = dict(os.environ)
    child_env.pop(CRASH_ENV, None)
    if crash_at:
        child_env[CRASH_ENV] = crash_at
    child_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "airflow_hudi_occ.testing.crash", json.dumps(payload)],
                          capture_output=True, text=True, timeout=timeout_s, env=child_env)
    return ChildResult(proc.returncode, proc.stdout, proc.stderr)


if __name__ == "__main__":  # pragma: no cover - runs in the child
    sys.exit(_child(json.loads(sys.argv[1])))
