"""The write pipeline's stage order and invariants, on a real table with the real Arrow
copy-on-write engine (each stage recorded as it runs): the order, every marker before any data
file, the clustering gate before any file, a failing file writer rolled back between the
engine's ``failure`` and ``after_abort``, a settled batch touching no stage, and the commit's schema."""

import json

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.pipeline import WritePipeline, commit_schema
from airflow_hudi_occ.core.commit.transaction import ALREADY_COMMITTED, TransactionState
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, CopyOnWriteEngine
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import PendingClusteringConflictError
from airflow_hudi_occ.core.services.clustering import schedule_clustering
from airflow_hudi_occ.core.table.file_system_view import list_base_files

STAGES = ("check_input", "prepare", "check_batch", "check_before_plan", "plan",
          "check_before_write", "write_files", "failure", "after_abort", "lost_to_twin", "close")


class Recording(CopyOnWriteEngine):
    """The real engine, each stage call recorded with the transaction's state at the time."""

    def __init__(self, *a, fail_after_markers: bool = False, **kw):
        super().__init__(*a, **kw)
        self.calls: list[str] = []
        self.states: dict[str, str] = {}
        self.markers_at_first_file: int | None = None
        self.fail_after_markers = fail_after_markers
        for name in STAGES:
            self._wrap(name)

    def _wrap(self, name):
        inner = getattr(self, name)

        def call(*a, **kw):
            self.calls.append(name)
            tx = next((x for x in a if hasattr(x, "state")), None)
            if tx is not None:
                self.states[name] = str(tx.state)
            return inner(*a, **kw)
        setattr(self, name, call)

    def write_files(self, tx, plan, schema_json):
        writer = self.writer
        original = writer.write_base_file

        def first_file_sees_every_marker(tx, *a, **kw):
            if self.markers_at_first_file is None:
                self.markers_at_first_file = len(tx.markers.data_files())
                if self.fail_after_markers:
                    raise RuntimeError("disk full")
            return original(tx, *a, **kw)
        writer.write_base_file = first_file_sees_every_marker
        try:
            return super().write_files(tx, plan, schema_json)
        finally:
            del writer.write_base_file


def _rows(ids, v="x", part="a"):
    return pa.Table.from_pylist([{"id": i, "p": part, "ts": 1, "v": f"{v}{i}"} for i in ids])


def _run(writer, engine, **kw):
    return writer.pipeline().run(engine, **kw)


def test_stages_run_in_order_and_every_marker_precedes_the_data_files(table, fast_options):
    w = ArrowTableWriter(table, WriteConfig.from_options(fast_options), threads=1)
    w.write(pa.concat_tables([_rows(range(4)), _rows(range(10, 14), part="b")]), "insert")
    eng = Recording(w, pa.concat_tables([_rows([1, 2], "u"), _rows([11, 50], "u", "b")]), "upsert")
    res = _run(w, eng)
    assert res.outcome == "committed"
    assert eng.calls == ["check_input", "prepare", "check_batch", "check_before_plan", "plan",
                         "check_before_write", "write_files", "close"]
    # planned while requested, written while inflight
    assert eng.states["plan"] == TransactionState.REQUESTED
    assert eng.states["check_before_write"] == TransactionState.INFLIGHT
    # three file groups (two stored ones updated, one new): all marked before the first file
    assert eng.markers_at_first_file == len(res.metadata.write_stats()) == 3


def test_the_clustering_gate_refuses_before_any_file_is_marked_or_written(table, fast_options):
    w = ArrowTableWriter(table, WriteConfig.from_options(fast_options), threads=1)
    for b in range(3):  # small file groups clustering will merge
        w.write(_rows([b * 10 + i for i in range(3)]), "insert")
    plan = schedule_clustering(table, fast_options)
    assert plan is not None
    eng = Recording(w, _rows([1], "u"), "upsert")
    with pytest.raises(PendingClusteringConflictError) as ei:
        _run(w, eng)
    assert "write_files" not in eng.calls and eng.calls[-3:] == ["failure", "after_abort", "close"]
    refused = ei.value.instant
    assert not [b for b in list_base_files(table, "a") if b.instant_time == refused]
    assert refused not in {i.requested_time for i in table.timeline().completed()}


def test_a_failing_file_writer_is_rolled_back_through_the_engine(table, fast_options):
    w = ArrowTableWriter(table, WriteConfig.from_options(fast_options), threads=1)
    eng = Recording(w, _rows(range(3)), "insert", fail_after_markers=True)
    with pytest.raises(RuntimeError, match="disk full"):
        _run(w, eng)
    assert eng.calls[-4:] == ["write_files", "failure", "after_abort", "close"]
    # the rollback ran between the two: the engine's after_abort saw the instant aborted
    assert eng.states["failure"] == TransactionState.INFLIGHT
    assert eng.states["after_abort"] == TransactionState.ABORTED
    tl = table.timeline()
    assert [i.action.value for i in tl.completed()] == ["rollback"]
    assert not list_base_files(table, "a")


def test_a_settled_batch_runs_no_stage_past_the_input_check(table, fast_options):
    w = ArrowTableWriter(table, WriteConfig.from_options(fast_options), threads=1)
    first = w.write(_rows(range(3)), "insert", batch_key="b-1")
    eng = Recording(w, _rows(range(3)), "insert")
    again = _run(w, eng, batch_key="b-1")
    assert again.outcome == ALREADY_COMMITTED
    assert again.instant.requested_time == first.instant.requested_time
    assert eng.calls == ["check_input"]


def test_the_commit_schema_evolves_from_the_last_write_and_a_delete_keeps_it(table, fast_options):
    w = ArrowTableWriter(table, WriteConfig.from_options(fast_options), threads=1)
    w.write(_rows(range(3)), "insert")
    wider = _rows([5]).append_column("extra", pa.array([1.5]))
    from airflow_hudi_occ.core.format.schema import avro_schema_json
    evolved = json.loads(commit_schema(table, "upsert", avro_schema_json(wider.schema, table.name)))
    assert [f["name"] for f in evolved["fields"]] == ["id", "p", "ts", "v", "extra"]
    keys_only = pa.table({"id": [1], "p": ["a"]})
    kept = commit_schema(table, "delete", avro_schema_json(keys_only.schema, table.name))
    assert kept == table.timeline().commit_metadata(table.timeline().last_completed_write()).schema
