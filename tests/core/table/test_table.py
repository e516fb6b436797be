import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import (CorruptMetadataError, TableExistsError, TableNotFoundError,
                                          UnsupportedTableVersionError, ConfigError)
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.format.properties import parse_properties, render_properties, table_checksum
from airflow_hudi_occ.testing.tables import java_fixture


def test_properties_round_trip_with_escapes():
    props = {"a.b": 'x:y=z {"k":"v"}', "sp ace": " lead", "uni": "é", "empty": ""}
    assert parse_properties(render_properties(props)) == props


def test_checksum_matches_java_hudi(tmp_path):
    path = java_fixture("v8_simplekeygen_nonhivestyle", tmp_path)
    t = Table.open(str(path))
    assert str(table_checksum(t.name, t.config.get("hoodie.database.name"))) == t.config.get("hoodie.table.checksum")


def test_create_writes_the_required_keys(tmp_path):
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts")
    props = Table.open(str(tmp_path / "t")).config.properties
    for k, v in {"hoodie.table.name": "t", "hoodie.table.type": "COPY_ON_WRITE", "hoodie.table.version": "8",
                 "hoodie.timeline.layout.version": "2", "hoodie.table.partition.fields": "p",
                 "hoodie.table.recordkey.fields": "id", "hoodie.table.precombine.field": "ts",
                 "hoodie.datasource.write.drop.partition.columns": "false"}.items():
        assert props[k] == v
    assert (tmp_path / "t" / ".hoodie" / "timeline").is_dir()
    assert t.timeline().instants == []


def test_create_twice_is_refused(tmp_path):
    Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"])
    with pytest.raises(TableExistsError):
        Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"])
    assert Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], exist_ok=True).name == "t"
    with pytest.raises(TableExistsError, match="record keys"):
        Table.create(str(tmp_path / "t"), "t", record_key_fields=["other"], exist_ok=True)


def test_missing_table(tmp_path):
    with pytest.raises(TableNotFoundError) as e:
        Table.open(str(tmp_path / "nothing"))
    assert "hoodie.properties" in str(e.value) and e.value.remedy


@pytest.mark.parametrize("version", ["5", "7", "10", "x"])
def test_unsupported_version(tmp_path, version):
    Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"])
    p = tmp_path / "t" / ".hoodie" / "hoodie.properties"
    text = p.read_text().replace("hoodie.table.version=8", f"hoodie.table.version={version}")
    p.write_text(text)
    before = sorted(x.name for x in (tmp_path / "t" / ".hoodie").rglob("*"))
    with pytest.raises(UnsupportedTableVersionError) as e:
        Table.open(str(tmp_path / "t"))
    assert e.value.remedy
    assert sorted(x.name for x in (tmp_path / "t" / ".hoodie").rglob("*")) == before


def test_truncated_properties(tmp_path):
    Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"])
    p = tmp_path / "t" / ".hoodie" / "hoodie.properties"
    p.write_bytes(p.read_bytes()[:40])
    with pytest.raises(CorruptMetadataError):
        Table.open(str(tmp_path / "t"))


def _tree(path):
    return {str(f.relative_to(path)): f.read_bytes() for f in sorted(path.rglob("*")) if f.is_file()}


def test_checksums_of_every_java_fixture_match(tmp_path):
    """Java's checksum is CRC32 of "<database>.<table>" with "" for no database (Java 1.1's v9
    tables have none): what the reader now checks before trusting a file."""
    for name in ("v6_simplekeygen_nonhivestyle", "v8_simplekeygen_nonhivestyle",
                 "v9_files_metadata_actions", "v9_txns_simple_overwrite"):
        for props_file in java_fixture(name, tmp_path / name).parent.rglob(".hoodie/hoodie.properties"):
            props = parse_properties(props_file.read_text())
            assert str(table_checksum(props["hoodie.table.name"], props.get("hoodie.database.name"))) \
                == props["hoodie.table.checksum"], props_file


def test_a_zero_byte_properties_file_beside_its_backup_is_read_from_it_and_restored(tmp_path, fast_options):
    """Issue 40: a writer that stopped while replacing hoodie.properties left it 0 bytes beside
    a valid backup; we refused the table ("lacks hoodie.table.name"). Java reads the backup
    then (its reader skips a file that fails its checksum; its recoverIfNeeded restores a
    file without one), and so do we: opening reads it and changes nothing, the next write
    restores the file under the lock and removes the backup."""
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts")
    meta = tmp_path / "t" / ".hoodie"
    good = (meta / "hoodie.properties").read_bytes()
    (meta / "hoodie.properties.backup").write_bytes(good)
    (meta / "hoodie.properties").write_bytes(b"")
    before = _tree(tmp_path / "t")
    opened = Table.open(t.base_uri)
    assert opened.config.properties == parse_properties(good.decode())
    assert _tree(tmp_path / "t") == before, "reading changes nothing"
    ArrowTableWriter(opened, WriteConfig.from_options(fast_options)).write(
        pa.table({"id": [1], "p": ["a"], "ts": [1]}), "upsert")
    assert (meta / "hoodie.properties").read_bytes() == good
    assert not (meta / "hoodie.properties.backup").exists()
    assert len(Table.open(t.base_uri).timeline().completed()) == 1


def test_a_file_that_fails_its_checksum_is_passed_over_for_the_backup_as_java_does(tmp_path):
    Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"])
    meta = tmp_path / "t" / ".hoodie"
    good = (meta / "hoodie.properties").read_text()
    (meta / "hoodie.properties.backup").write_text(good)
    (meta / "hoodie.properties").write_text(good.replace("hoodie.table.name=t", "hoodie.table.name=u"))
    assert Table.open(str(tmp_path / "t")).name == "t"
    (meta / "hoodie.properties.backup").unlink()
    with pytest.raises(CorruptMetadataError, match="is not the checksum of its table name"):
        Table.open(str(tmp_path / "t"))


@pytest.mark.parametrize("backup", [None, b"", b"\x89PNG garbage"])
def test_garbage_properties_name_the_file_and_how_to_restore_it(tmp_path, backup):
    """Issue 40: a garbage hoodie.properties gave a CorruptMetadataError with no remedy. It now
    names the file, what is wrong with it (and with its backup, if any) and the way back:
    restore it from a copy. Nothing is changed."""
    Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"])
    meta = tmp_path / "t" / ".hoodie"
    (meta / "hoodie.properties").write_bytes(b"\x00\xff\xfe not properties")
    if backup is not None:
        (meta / "hoodie.properties.backup").write_bytes(backup)
    before = _tree(tmp_path / "t")
    with pytest.raises(CorruptMetadataError) as exc:
        Table.open(str(tmp_path / "t"))
    main = str(meta / "hoodie.properties")
    assert exc.value.path == main
    assert exc.value.message.startswith(f"hoodie.properties at {main} cannot be read as a "
                                        "table's properties: it is not text")
    if backup is None:
        assert exc.value.message.endswith("; there is no hoodie.properties.backup beside it")
    else:
        assert f"its backup {main}.backup cannot be used either (it is" in exc.value.message
    assert exc.value.remedy.startswith(f"restore {main} from a copy of the table")
    assert _tree(tmp_path / "t") == before


def test_writes_refused_on_v6_allowed_on_v8_and_v9(tmp_path):
    t = Table.open(str(java_fixture("v6_simplekeygen_nonhivestyle", tmp_path / "v6")))
    with pytest.raises(UnsupportedTableVersionError):
        t.require_writable()
    for name in ("v8_simplekeygen_nonhivestyle", "v9_txns_simple_overwrite"):
        Table.open(str(java_fixture(name, tmp_path / name))).require_writable()


def test_bad_table_name_and_missing_keys(tmp_path):
    with pytest.raises(ConfigError):
        Table.create(str(tmp_path / "t"), "bad name", record_key_fields=["id"])
    with pytest.raises(ConfigError):
        Table.create(str(tmp_path / "t"), "t", record_key_fields=[])


def _plain_parquet_folder(path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    (path / "day=2024-01-01").mkdir(parents=True)
    pq.write_table(pa.table({"id": [1, 2]}), path / "day=2024-01-01" / "part-0.parquet")
    (path / "_SUCCESS").write_bytes(b"")
    return path


def test_create_refuses_a_folder_of_plain_files_and_leaves_it_unchanged(tmp_path):
    from airflow_hudi_occ.core.errors import TableLocationNotEmptyError
    from airflow_hudi_occ.testing.tables import tree_snapshot
    folder = _plain_parquet_folder(tmp_path / "plain")
    before = tree_snapshot(folder)
    for exist_ok in (False, True):
        with pytest.raises(TableLocationNotEmptyError) as e:
            Table.create(str(folder), "t", record_key_fields=["id"], exist_ok=exist_ok)
        assert str(folder) in e.value.message and "_SUCCESS" in e.value.message
        assert "day=2024-01-01" in e.value.message and e.value.entries == ["_SUCCESS", "day=2024-01-01"]
        assert "new or empty path" in e.value.remedy
        assert tree_snapshot(folder) == before  # no .hoodie, nothing else


def test_create_accepts_an_empty_folder_and_a_bare_hoodie_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    assert Table.create(str(tmp_path / "empty"), "t", record_key_fields=["id"]).name == "t"
    (tmp_path / "bare" / ".hoodie").mkdir(parents=True)  # a creation that died before its first file
    assert Table.create(str(tmp_path / "bare"), "t", record_key_fields=["id"]).name == "t"


def test_create_with_exist_ok_opens_a_table_that_already_holds_data(tmp_path):
    # A second creator arriving after the first one's data (the race of two first writers).
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"])
    (tmp_path / "t" / "p1").mkdir()
    (tmp_path / "t" / "p1" / "x.parquet").write_bytes(b"PAR1")
    assert Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                        exist_ok=True).base_uri == t.base_uri


def test_create_on_a_file_names_the_path_and_leaves_the_file(tmp_path):
    from airflow_hudi_occ.core.errors import TableLocationNotADirectoryError
    f = tmp_path / "orders"
    f.write_bytes(b"not a folder")
    with pytest.raises(TableLocationNotADirectoryError) as e:
        Table.create(str(f), "orders", record_key_fields=["id"])
    assert str(f) in str(e.value) and "is a file, not a folder" in str(e.value) and e.value.remedy
    assert f.read_bytes() == b"not a folder"


def test_create_records_url_encoding_as_a_table_property(tmp_path):
    t = Table.create(str(tmp_path / "e"), "e", record_key_fields=["id"], url_encode_partitions=True)
    assert Table.open(t.base_uri).config.properties["hoodie.datasource.write.partitionpath.urlencode"] == "true"
    assert Table.open(t.base_uri).config.url_encode_partitions
    plain = Table.create(str(tmp_path / "p"), "p", record_key_fields=["id"])
    assert not Table.open(plain.base_uri).config.url_encode_partitions


def test_a_table_without_a_record_key_names_hudis_auto_keys_as_unsupported(tmp_path):
    from airflow_hudi_occ.core.errors import ConfigError
    with pytest.raises(ConfigError) as e:
        Table.create(str(tmp_path / "t"), "t", record_key_fields=[])
    assert e.value.key == "hoodie.datasource.write.recordkey.field"
    assert "auto-generated record keys" in str(e.value) and "unique id column" in e.value.remedy
    assert not (tmp_path / "t").exists()


def test_replacing_properties_drops_the_hadoop_checksums_java_left(tmp_path):
    """Java Hudi on a local disk leaves ``.hoodie.properties.crc`` (Hadoop's checksum of the
    bytes it wrote) and checks it on every read: kept beside our new file it would make the
    table unreadable to Java (tests/interop/test_ours_on_java_tables.py shows it). Files of
    ours that Java never wrote keep nothing of the kind either way."""
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"])
    meta = tmp_path / "t" / ".hoodie"
    for name in (".hoodie.properties.crc", ".hoodie.properties.backup.crc"):
        (meta / name).write_bytes(b"crc\x00\x00\x02\x00\x00stale")
    t.update_properties({"hoodie.table.metadata.partitions": ""})
    assert not (meta / ".hoodie.properties.crc").exists()
    assert not (meta / ".hoodie.properties.backup.crc").exists()
    assert Table.open(str(tmp_path / "t")).config.get("hoodie.table.metadata.partitions") == ""
