"""Fixture tables and the independent reader.

``hudi`` (the hudi-rs Python binding) is the oracle: what it reads from a table is what any
other Hudi reader would read. It is a test dependency only; the library never imports it.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pyarrow as pa

from airflow_hudi_occ.core.format.storage import Storage


#: the Java-written fixture tables, vendored in the repository so that a clone alone passes its
#: tests (small zips from hudi-rs's test data: tests/fixtures/java-hudi-tables/README.md)
FIXTURES_DIR = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "java-hudi-tables"


def java_fixture(name: str, dest: Path) -> Path:
    """Unzip one of the Java-written fixture tables into ``dest``; returns the table path."""
    z = FIXTURES_DIR / f"{name}.zip"
    if not z.exists():
        raise FileNotFoundError(f"fixture {z} is missing: the tests run from a checkout of the "
                                f"repository, which holds tests/fixtures/java-hudi-tables/")
    with zipfile.ZipFile(z) as zf:
        members = [m for m in zf.namelist() if not m.startswith("__MACOSX")]
        zf.extractall(dest, members)
    found = [p.parent.parent for p in dest.rglob(".hoodie/hoodie.properties")
             if "metadata" not in p.parts[-4:-2]]
    return sorted(found, key=lambda p: len(p.parts))[0]


def hudi_read(base_path: str, *, as_of: str | None = None, start: str | None = None,
              end: str | None = None, read_optimized: bool = False,
              storage_options: dict | None = None) -> pa.Table:
    """Read a table with hudi-rs: snapshot, time travel (as_of) or incremental (start, end];
    ``read_optimized``: base files only (merge-on-read). A remote table (``s3://``) takes
    hudi-rs's ``storage_options`` (e.g. ``S3Server.hudi_rs_options``)."""
    from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

    uri = base_path if "://" in base_path else os.path.abspath(base_path)
    builder = HudiTableBuilder.from_base_uri(uri)
    if storage_options:
        builder = builder.with_storage_options({k: str(v) for k, v in storage_options.items()})
    table = builder.build()
    opts = HudiReadOptions()
    if read_optimized:
        opts = opts.with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
    if as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    if start is not None or end is not None:
        opts = opts.with_query_type(HudiQueryType.Incremental)
        if start is not None:
            opts = opts.with_start_timestamp(start)
        if end is not None:
            opts = opts.with_end_timestamp(end)
    batches = table.read(opts)
    if not batches:
        return pa.table({})
    return pa.Table.from_batches(batches)


def rows_by_key(t: pa.Table, key: str = "id", columns: list[str] | None = None) -> dict:
    """{key: {column: value}} for comparing tables regardless of row order."""
    if t.num_rows == 0:
        return {}
    cols = columns or [c for c in t.column_names if not c.startswith("_hoodie_")]
    out = {}
    for row in t.select(cols).to_pylist():
        k = row[key]
        if k in out:
            raise AssertionError(f"duplicate key {k!r} in table read")
        out[k] = row
    return out


#: Write options for tests: the file lock, quick lock retries, a small clock-skew wait and a
#: one-second heartbeat, so contended tests finish fast without changing any semantics.
#: the Spark tests' keyed table (key ``id``, partition ``p``, ordering ``ts``, name ``tbl``) on
#: the file lock with fast lock retries and a 2 ms clock-skew wait
SPARK_TEST_OPTIONS = {"hoodie.datasource.write.recordkey.field": "id",
                      "hoodie.datasource.write.partitionpath.field": "p",
                      "hoodie.datasource.write.precombine.field": "ts",
                      "hoodie.datasource.write.table.name": "tbl",
                      "hoodie.write.lock.provider": "filesystem",
                      "hoodie.write.lock.client.wait_time_ms_between_retry": "50",
                      "hoodie.time.generator.max_expected_clock_skew_ms": "2"}

FAST_WRITE_OPTIONS = {
    "hoodie.write.lock.provider": "filesystem",
    "hoodie.write.lock.wait_time_ms": "2000",
    "hoodie.write.lock.client.num_retries": "30",
    "hoodie.write.lock.client.wait_time_ms_between_retry": "50",
    "hoodie.time.generator.max_expected_clock_skew_ms": "2",
    "hoodie.client.heartbeat.interval_in_ms": "1000",
}


#: The heartbeat of a test's set-up writers. A test whose subject needs a sub-second expiry (a
#: killed writer found dead quickly) gives its other writers this one: a writer whose beat is
#: starved past its expiry rightly stops itself, and at load (3 pytest workers on 2 cores) a
#: set-up write at 0.6-0.8 s was rolled back before the case under test began.
SETUP_HEARTBEAT = {"hoodie.client.heartbeat.interval_in_ms": "5000"}


def tree_snapshot(path: str | os.PathLike) -> dict[str, str]:
    """Every entry below ``path``: a folder as ``"dir"``, a file as the SHA-256 of its bytes.
    Equal snapshots before and after an operation prove it left the folder byte-for-byte as
    it was (no file added, removed or changed, no empty folder left behind)."""
    import hashlib
    root = Path(path)
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = "dir"
        for f in filenames:
            full = os.path.join(dirpath, f)
            out[os.path.relpath(full, root)] = hashlib.sha256(Path(full).read_bytes()).hexdigest()
    return out


class ListCalls:
    """Every listing the storage layer makes (any backend, the metadata table's own included),
    counted around :class:`Storage`'s two list primitives (patched with pytest's
    ``monkeypatch``, so undone after the test). What a reader costs in listings is asserted
    with it by the core, Spark and Java-interop tests alike."""

    def __init__(self, monkeypatch):
        self.paths: list[str] = []
        for name in ("list_names", "walk_files"):
            original = getattr(Storage, name)

            def counted(storage, path, _original=original):
                self.paths.append(path)
                return _original(storage, path)
            monkeypatch.setattr(Storage, name, counted)

    def of_data(self, table) -> list[str]:
        """The listings outside ``.hoodie/``: the table's root and its partition folders."""
        meta = table.storage.path(".hoodie")
        return [p for p in self.paths if not p.startswith(meta)]

    def clear(self) -> None:
        self.paths.clear()
