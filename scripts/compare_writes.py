"""Byte-for-byte comparison of the files two versions of the package write.

Why: the write pipeline (core/commit/pipeline.py) replaced three copies of the write sequence;
its claim is that every engine writes exactly the files it wrote before. This script runs the
same seeded, randomized write sequences (insert, upsert, delete, insert_overwrite, bulk_insert
on copy-on-write and merge-on-read tables, table versions 8 and 9, the core writers and the
Spark engine) with every source of chance pinned:

- instant times: the process's instant-time generator is replaced by one on a fixed clock that
  advances one second per time asked, and sleeps not at all (no clock skew wait);
- file ids: ``uuid.uuid4`` draws from a seeded ``random.Random`` in the driver (Spark's new file
  ids are named on the driver too);
- writer ids: given.

Then it records every file under each table (path -> sha256 of its bytes). ``compare`` reports
files only on one side and files whose bytes differ. A few values cannot be pinned without
reaching into the code (milliseconds a file took to write, the attempt log's wall-clock times,
the heartbeat): run ``run`` twice on the same version to see them (``compare`` of the two runs
is the noise floor); the keys named in ``VOLATILE_KEYS`` are blanked in JSON files before
hashing, and nothing else.

Measured noise (two runs of ``main``, 2026-11-27): the core writers repeat byte for byte; the
Spark engine's ``bulk_insert`` without combining (``spark/pair_write``: each input task writes
file groups of its own) does not: which task's rows land under which pinned file id follows
Spark's task scheduling, so those files, the commits naming their sizes and the files later
merged from them differ between two runs of the same code. A difference between versions
counts only where it is not among the differences between two runs of one version.

Usage (each version from its own checkout)::

    PYTHONPATH=/work/main python scripts/compare_writes.py run --out /tmp/cmp/main [--spark]
    PYTHONPATH=$PWD python scripts/compare_writes.py run --out /tmp/cmp/branch [--spark]
    python scripts/compare_writes.py compare /tmp/cmp/main /tmp/cmp/branch
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import random
import sys
import uuid

#: JSON keys whose values are wall-clock durations or times (blanked before hashing)
VOLATILE_KEYS = {"totalCreateTime", "totalUpsertTime", "startedAtMs", "started_at_ms", "endedAtMs",
                 "ended_at_ms", "seconds_discarded", "finished_at_ms", "seconds", "recordedAtMs",
                 "recorded_at_ms"}
#: folders of a table whose files are about processes, not data (heartbeats come and go)
SKIPPED_DIRS = (".hoodie/.heartbeat",)

OPS_COW = ["insert", "upsert", "upsert", "delete", "insert_overwrite", "bulk_insert"]
OPS_MOR = ["insert", "upsert", "upsert", "delete", "bulk_insert"]


def pin_chance(seed: int) -> None:
    """Fixed instant times and file ids for this process (see the module docstring)."""
    from airflow_hudi_occ.core.format import instant_time as it

    clock = {"t": 1_767_225_600.0}  # 2026-01-01T00:00:00Z

    def tick() -> float:
        clock["t"] += 1.0
        return clock["t"]

    class Pinned(dict):
        def get(self, key, default=None):
            if key not in self:
                self[key] = it.InstantTimeGenerator(0, clock=tick, sleep=lambda s: None)
            return dict.get(self, key)

    it._DEFAULT = Pinned()  # noqa: SLF001 - a script pinning the process generator
    rng = random.Random(seed)
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)


def batch(rng: random.Random, n: int, key_space: int, *, with_values: bool = True):
    import pyarrow as pa
    keys = rng.sample(range(key_space), n)
    cols = {"id": pa.array(keys, pa.int64()),
            "p": pa.array([f"p{k % 3}" for k in keys]),
            "ts": pa.array([rng.randrange(1000) for _ in keys], pa.int64())}
    if with_values:
        cols["v"] = pa.array([f"v{rng.randrange(10**6)}" for _ in keys])
        cols["d"] = pa.array([rng.random() for _ in keys], pa.float64())
    return pa.table(cols)


def cases(spark: bool):
    engines = ["core"] + (["spark"] if spark else [])
    for engine in engines:
        for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
            for version in (8, 9):
                yield engine, table_type, version


def run_core(base: str, table_type: str, version: int, rng: random.Random, steps: int,
             replays: bool = True) -> list[str]:
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.core.table.table import Table
    from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    table = Table.create(base, "cmp", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", version=version, table_type=table_type)
    cls = MergeOnReadWriter if table_type == "MERGE_ON_READ" else ArrowTableWriter
    w = cls(table, WriteConfig(), writer_id="cmp-writer", threads=1)
    ops = OPS_MOR if table_type == "MERGE_ON_READ" else OPS_COW
    done = []
    keyed = []
    for i in range(steps):
        op = ops[0] if i == 0 else rng.choice(ops)
        data = batch(rng, rng.randrange(5, 40), 120, with_values=op != "delete")
        key = f"batch-{i}" if rng.random() < 0.5 else None
        res = w.write(data, op, batch_key=key, checkpoint=f"cp-{i}")
        done.append(f"{op}:{res.outcome}:{res.instant.requested_time}")
        if key is not None:
            keyed.append((data, op, key))
        if keyed and replays and rng.random() < 0.3:  # a retried task: the batch is settled
            data, op, key = rng.choice(keyed)
            res = w.write(data, op, batch_key=key)
            done.append(f"replay {op}:{res.outcome}:{res.instant.requested_time}")
    return done


def run_spark(session, base: str, table_type: str, version: int, rng: random.Random,
              steps: int) -> list[str]:
    from airflow_hudi_occ.core.errors import HudiOccError
    from airflow_hudi_occ.spark.writer import SparkHudiWriter
    opts = {"hoodie.table.name": "cmp", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": table_type,
            "hoodie.write.table.version": str(version)}
    w = SparkHudiWriter(session, base, opts, writer_id="cmp-writer")
    ops = OPS_MOR if table_type == "MERGE_ON_READ" else OPS_COW
    done = []
    for i in range(steps):
        op = ops[0] if i == 0 else rng.choice(ops)
        data = batch(rng, rng.randrange(5, 40), 120, with_values=op != "delete")
        df = session.createDataFrame(data.to_pandas())
        key = f"batch-{i}" if rng.random() < 0.5 else None
        try:
            res = w.write(df, op, batch_key=key, checkpoint=f"cp-{i}")
        except HudiOccError as e:  # a refused or failed write: its rollback is compared too
            done.append(f"{op}:error:{type(e).__name__}:{getattr(e, 'instant', None)}")
            continue
        done.append(f"{op}:{res.outcome}:{res.instant}")
    return done


def digest(path: pathlib.Path) -> str:
    raw = path.read_bytes()
    if raw[:4] == b"Obj\x01":
        # an Avro container file: its 16-byte sync marker is drawn at random by every writer
        # (Java's and fastavro's), so the bytes never repeat; its schema and records do
        import fastavro
        import io
        reader = fastavro.reader(io.BytesIO(raw))
        doc = {"schema": reader.writer_schema, "records": [_blank(r) for r in reader]}
        return hashlib.sha256(json.dumps(doc, sort_keys=True, default=repr).encode()).hexdigest()
    if path.name in ("hoodie.properties", ".hoodie_partition_metadata"):
        # java.util.Properties' first line: the date the file was written
        raw = b"\n".join(line for line in raw.split(b"\n") if not line.startswith(b"#"))
    if path.suffix in (".json", ".commit", ".deltacommit", ".replacecommit") or path.name.endswith(".json"):
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if doc is not None:
            raw = json.dumps(_blank(doc), sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()


def _blank(doc):
    if isinstance(doc, dict):
        return {k: (None if k in VOLATILE_KEYS else _blank(v)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_blank(v) for v in doc]
    return doc


def manifest(base: pathlib.Path) -> dict[str, str]:
    out = {}
    for f in sorted(base.rglob("*")):
        rel = f.relative_to(base).as_posix()
        if f.is_file() and not any(rel.startswith(d) for d in SKIPPED_DIRS):
            out[rel] = digest(f)
    return out


def cmd_run(args) -> int:
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pin_chance(args.seed)
    session = None
    if args.spark:
        from airflow_hudi_occ.spark.session import local_session
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        session = local_session("local[2]", "compare-writes")
    report = {}
    for engine, table_type, version in cases(args.spark):
        if args.only and engine != args.only:
            continue
        sequences = args.sequences if engine == "core" else args.spark_sequences
        steps = args.steps if engine == "core" else args.spark_steps
        for s in range(sequences):
            name = f"{engine}-{table_type.lower()}-v{version}-seq{s}"
            rng = random.Random(f"{args.seed}-{name}")
            base = out / name
            if engine == "core":
                ops = run_core(str(base), table_type, version, rng, steps)
            else:
                ops = run_spark(session, str(base), table_type, version, rng, steps)
            report[name] = {"ops": ops, "files": manifest(base)}
            print(f"{name}: {len(ops)} writes, {len(report[name]['files'])} files", flush=True)
    (out / "manifest.json").write_text(json.dumps(report, indent=1, sort_keys=True))
    if session is not None:
        session.stop()
    return 0


def cmd_compare(args) -> int:
    a = json.loads((pathlib.Path(args.a) / "manifest.json").read_text())
    b = json.loads((pathlib.Path(args.b) / "manifest.json").read_text())
    bad = 0
    files = same = 0
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            print(f"{name}: only in {'A' if name in a else 'B'}")
            bad += 1
            continue
        fa, fb = a[name]["files"], b[name]["files"]
        if a[name]["ops"] != b[name]["ops"]:
            print(f"{name}: different write outcomes")
            bad += 1
        for rel in sorted(set(fa) | set(fb)):
            files += 1
            if fa.get(rel) == fb.get(rel):
                same += 1
                continue
            bad += 1
            where = "only in A" if rel not in fb else ("only in B" if rel not in fa else "differs")
            print(f"{name}/{rel}: {where}")
    print(f"{len(set(a) | set(b))} sequences, {files} files, {same} identical, {bad} differences")
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--seed", type=int, default=29)
    r.add_argument("--sequences", type=int, default=2)
    r.add_argument("--steps", type=int, default=8)
    r.add_argument("--spark", action="store_true")
    r.add_argument("--spark-sequences", type=int, default=1)
    r.add_argument("--spark-steps", type=int, default=6)
    r.add_argument("--only", choices=["core", "spark"], help="run one engine's sequences")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    args = p.parse_args(argv)
    return cmd_run(args) if args.cmd == "run" else cmd_compare(args)


if __name__ == "__main__":
    sys.exit(main())
