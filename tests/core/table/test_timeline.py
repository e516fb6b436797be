"""Timeline and file-system view against Java-written tables and the hudi-rs reader."""

import pytest

from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.format.instant import Action, State
from airflow_hudi_occ.core.format.metadata import CommitMetadata
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import java_fixture

FIXTURES = ["v6_simplekeygen_nonhivestyle", "v6_simplekeygen_nonhivestyle_overwritetable",
            "v8_simplekeygen_nonhivestyle", "v9_txns_simple_overwrite"]


@pytest.mark.parametrize("name", FIXTURES)
def test_file_groups_match_hudi_rs(tmp_path, name):
    from hudi import HudiTableBuilder
    path = java_fixture(name, tmp_path)
    ours = {(s.partition, s.file_id, s.instant_time) for s in FileSystemView(Table.open(str(path))).latest_file_slices()}
    theirs = {(s.partition_path, s.file_id, s.creation_instant_time)
              for s in HudiTableBuilder.from_base_uri(str(path)).build().get_file_slices()}
    assert ours == theirs and ours


@pytest.mark.parametrize("name", FIXTURES)
def test_completed_commits_match_hudi_rs(tmp_path, name):
    from hudi import HudiTableBuilder
    path = java_fixture(name, tmp_path)
    tl = Table.open(str(path)).timeline()
    hudi_tl = HudiTableBuilder.from_base_uri(str(path)).build().get_timeline()
    theirs = sorted(i.timestamp for i in hudi_tl.get_completed_commits()) + \
        sorted(i.timestamp for i in hudi_tl.get_completed_replacecommits())
    assert sorted(i.requested_time for i in tl.completed_writes()) == sorted(theirs)


def test_v8_fixture_timeline_details(tmp_path):
    tl = Table.open(str(java_fixture("v8_simplekeygen_nonhivestyle", tmp_path))).timeline()
    assert [(i.requested_time, i.completion_time, i.action, i.state) for i in tl] == [
        ("20250713011315930", "20250713011316231", Action.COMMIT, State.COMPLETED),
        ("20250713011316909", "20250713011317225", Action.COMMIT, State.COMPLETED)]
    meta = tl.commit_metadata(tl.instants[1])
    assert meta.operation_type == "UPSERT"
    assert meta.written_file_groups() == {("10", "7b0ea4f9-3768-4e87-b12c-8d33efd22b55-0"),
                                          ("30", "6653c109-b3c0-470e-8ad4-f45947474a34-0")}
    assert '"name":"id"' in meta.schema


def test_v6_replacecommit_json_is_read(tmp_path):
    tl = Table.open(str(java_fixture("v6_simplekeygen_nonhivestyle_overwritetable", tmp_path))).timeline()
    rc = [i for i in tl if i.action is Action.REPLACE_COMMIT][0]
    meta = tl.commit_metadata(rc)
    assert meta.operation_type == "INSERT_OVERWRITE_TABLE"
    assert len(meta.replaced_file_groups()) == 3


def test_time_travel_matches_hudi_rs(tmp_path):
    from airflow_hudi_occ.core.commit.writer import read_table
    from airflow_hudi_occ.testing.tables import hudi_read
    path = java_fixture("v9_txns_simple_overwrite", tmp_path)
    t = Table.open(str(path))
    seen = []
    for inst in t.timeline().completed_writes():
        ours = read_table(t, as_of=inst.requested_time)
        theirs = hudi_read(str(path), as_of=inst.requested_time)
        key = t.config.record_key_fields[0]
        assert sorted(ours.column(key).to_pylist()) == sorted(theirs.column(key).to_pylist())
        seen.append(ours.num_rows)
    assert len(set(seen)) > 1  # the instants really show different tables


@pytest.mark.parametrize("cut", [0.2, 0.5, 0.9])
def test_truncated_commit_is_a_typed_error(tmp_path, cut):
    path = java_fixture("v8_simplekeygen_nonhivestyle", tmp_path)
    t = Table.open(str(path))
    inst = t.timeline().completed()[0]
    f = t.timeline().file_path(inst)
    data = open(f, "rb").read()
    open(f, "wb").write(data[: int(len(data) * cut)])
    with pytest.raises(CorruptMetadataError) as e:
        CommitMetadata.decode(open(f, "rb").read(), f)
    assert f in str(e.value)


def test_garbage_commit_is_a_typed_error():
    with pytest.raises(CorruptMetadataError):
        CommitMetadata.decode(b"Obj\x01garbage", "x.commit")
    with pytest.raises(CorruptMetadataError):
        CommitMetadata.decode(b"{not json", "x.commit")
    with pytest.raises(CorruptMetadataError):
        CommitMetadata.decode(b"[1,2]", "x.commit")


def test_inside_listed_ahead_the_first_load_takes_the_listing_made_as_it_began(tmp_path):
    """``listed_ahead``: the first load of a table's timeline in the section is the listing
    started when the section began (an instant created since is not in it), the next load lists
    afresh; a listing the section did not take is dropped at its end, and a nested section does
    not list again what the outer one started."""
    from airflow_hudi_occ.core.format.instant import Instant
    from airflow_hudi_occ.core.table.timeline import Timeline, create_requested, listed_ahead
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"])
    calls = []
    raw = t.storage.list_names

    def counted(folder):
        calls.append(folder)
        return raw(folder)
    t.storage.list_names = counted
    with listed_ahead(t, None):
        assert len(calls) == 1  # started as the section began (locally: at once)
        create_requested(t, Instant("20260101000000000", Action.COMMIT, State.REQUESTED))
        with listed_ahead(t):
            assert len(calls) == 1
            assert Timeline.load(t).get("20260101000000000") is None
            assert len(calls) == 1  # the started listing, taken
        assert Timeline.load(t).get("20260101000000000") is not None
        assert len(calls) == 2
    with listed_ahead(t):
        create_requested(t, Instant("20260101000000001", Action.COMMIT, State.REQUESTED))
    assert Timeline.load(t).get("20260101000000001") is not None  # not the dropped listing
    assert len(calls) == 4
