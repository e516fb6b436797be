"""``hudi://`` assets: one Airflow asset per Hudi table, so DAGs can be scheduled on its commits.

The URI is ``hudi://<store>/<location>`` (docs/assets-and-lineage.md):

- ``<store>`` is the table's file system, the fsspec protocol of its base path (``file``,
  ``s3``, ``gs``, ``abfs``, ``hdfs``...), lower-cased, with the Hadoop spellings folded
  (``s3a``/``s3n`` -> ``s3``, ``gcs`` -> ``gs``): the same table written as ``s3a://`` by
  Spark and ``s3://`` by Python is one asset.
- ``<location>`` is the rest of the base path: the absolute path of a local table, the
  bucket and key of an object-store table.

So ``/data/lake/orders`` is ``hudi://file/data/lake/orders`` and ``s3a://lake/orders/`` is
``hudi://s3/lake/orders``. ``hudi:///data/lake/orders`` (empty authority, as in ``file:///``)
is accepted and normalised to ``hudi://file/...``: Python's ``urlunsplit`` renders an empty
authority of an unknown scheme as ``hudi:/data/...``, so an empty authority cannot be the
stored form; naming the store keeps every URI in one shape. Paths are normalised (duplicate
slashes, ``.``, ``..``, trailing slashes), so two spellings of one table are one asset.

Errors: a malformed URI raises :class:`~airflow_hudi_occ.core.errors.InvalidTableUriError`
(a ``ValueError``, as Airflow expects of a URI handler), naming what is wrong and the fix;
the DAG that names it fails to import, and no other. Building an asset does no I/O (Airflow
calls :func:`sanitize_uri` and :func:`create_asset` while parsing DAGs, and a table that its
DAG will create must be nameable before it exists); :func:`require_table` is where our
operators check that an asset they are given really is a Hudi table.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from airflow_hudi_occ.core.errors import InvalidTableUriError, TableNotFoundError
from airflow_hudi_occ.provider.version_compat import Asset, AssetAlias

SCHEME = "hudi"
#: the Hadoop / alternative spellings of one store, folded so that one table is one asset
STORE_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "local": "file"}
#: the asset alias through which a task whose table is known only at run time emits its event
ALIAS_PREFIX = "hudi-occ-table:"
_STORE = re.compile(r"^[a-z][a-z0-9+.-]*$")


def _fail(uri: str, problem: str, remedy: str) -> InvalidTableUriError:
    return InvalidTableUriError(f"invalid Hudi table URI {uri!r}: {problem}", uri=uri, remedy=remedy)


def _store(name: str, uri: str) -> str:
    store = name.lower()
    store = STORE_ALIASES.get(store, store)
    if not _STORE.match(store):
        raise _fail(uri, f"{name!r} is not a storage protocol",
                    "write hudi://<store>/<location>, e.g. hudi://s3/bucket/table or "
                    "hudi://file/abs/path (hudi:///abs/path for a local table)")
    return store


def _location(store: str, path: str, uri: str) -> str:
    """``path`` without duplicate slashes, ``.`` and ``..``; never above its root (the file
    system root, or the bucket of an object store)."""
    parts: list[str] = []
    for seg in path.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if not parts or (store != "file" and len(parts) == 1):
                raise _fail(uri, "'..' goes above the root of its " +
                            ("file system" if store == "file" else "bucket"),
                            "name the table's base path without '..' above its root")
            parts.pop()
            continue
        parts.append(seg)
    if not parts:
        raise _fail(uri, "it has no path: a table is a folder, not a whole " +
                    ("file system" if store == "file" else "store"),
                    f"write hudi://{store}/<{'abs/path' if store == 'file' else 'bucket/path'}>")
    return "/".join(parts)


def sanitize_uri(parsed: urllib.parse.SplitResult) -> urllib.parse.SplitResult:
    """Airflow's URI handler for ``hudi``: given the URI as Airflow has split it (scheme
    lower-cased, trailing slashes stripped), the canonical ``hudi://<store>/<location>``."""
    # as written (urlunsplit would drop the empty authority of hudi:///)
    uri = f"{SCHEME}://{parsed.netloc}{parsed.path}" + (f"?{parsed.query}" if parsed.query else "")
    if "@" in parsed.netloc:
        raise _fail(uri, "it carries user info (credentials do not belong in an asset URI, "
                         "which every DAG and the UI show)",
                    "put credentials in the table's connection (storage_options) and write "
                    "hudi://<store>/<location>")
    if parsed.query:
        raise _fail(uri, f"it has a query ({parsed.query!r}); a table URI names a table, not "
                         "how to open it", "drop the query; storage options belong in the "
                                           "table's connection")
    if ":" in parsed.netloc:
        raise _fail(uri, f"its authority {parsed.netloc!r} is a host:port; the authority of a "
                         "hudi URI is the store", "write hudi://<store>/<location>, e.g. "
                                                  "hudi://hdfs/namenode:8020/path")
    store = _store(parsed.netloc or "file", uri)
    return urllib.parse.SplitResult(SCHEME, store, "/" + _location(store, parsed.path, uri), "", "")


def table_uri(path: str, *, storage: str | None = None) -> str:
    """The canonical ``hudi://`` URI of a table, from its base path (``/abs/path``,
    ``file:///abs/path``, ``s3a://bucket/key``), a ``hudi://`` URI, or a location in
    ``storage`` (``table_uri("bucket/key", storage="s3")``)."""
    raw = str(path).strip()
    if not raw:
        raise _fail(raw, "it is empty", "give the table's base path, e.g. /data/lake/orders "
                                        "or s3://bucket/orders")
    split = urllib.parse.urlsplit(raw)
    if split.scheme.lower() == SCHEME:
        parts = split
    elif storage is not None:
        if split.scheme:
            raise _fail(raw, f"storage={storage!r} was given and the path has its own scheme "
                             f"{split.scheme!r}", "give one of them")
        parts = urllib.parse.SplitResult(SCHEME, storage, "/" + raw.lstrip("/"), "", "")
    elif split.scheme and len(split.scheme) > 1:  # a Windows drive letter is no scheme
        if split.scheme.lower() in ("file", "local"):
            if split.netloc not in ("", "localhost"):
                raise _fail(raw, f"a file URI with host {split.netloc!r}",
                            "use file:///abs/path (a local table)")
            parts = urllib.parse.SplitResult(SCHEME, "file", split.path, "", "")
        else:
            parts = urllib.parse.SplitResult(SCHEME, split.scheme,
                                              "/" + split.netloc + split.path, split.query, "")
    else:
        if not raw.startswith("/"):
            raise _fail(raw, "a relative path names a different table in every working "
                             "directory", "give the table's absolute base path")
        parts = urllib.parse.SplitResult(SCHEME, "file", raw, "", "")
    return urllib.parse.urlunsplit(sanitize_uri(parts._replace(scheme=SCHEME)))


def base_path(uri: str | Asset) -> str:
    """The base path that the library opens for a ``hudi://`` URI (the inverse of
    :func:`table_uri`): ``/abs/path`` for a local table, ``<store>://<location>`` otherwise."""
    u = uri.uri if isinstance(uri, Asset) else str(uri)
    split = urllib.parse.urlsplit(u)
    if split.scheme.lower() != SCHEME:
        raise _fail(u, f"its scheme is {split.scheme or 'missing'!r}, not {SCHEME!r}",
                    "name the table as hudi://<store>/<location>")
    canonical = sanitize_uri(split._replace(scheme=SCHEME))
    if canonical.netloc == "file":
        return canonical.path
    return f"{canonical.netloc}:/{canonical.path}"


def is_table_asset(obj: Any) -> bool:
    return isinstance(obj, Asset) and obj.uri.startswith(SCHEME + "://")


def create_asset(*, path: str, storage: str | None = None, extra: dict | None = None,
                 name: str | None = None) -> Asset:
    """The asset of the table at ``path`` (the factory Airflow registers for ``hudi``, also
    what DAG authors call): ``schedule=[create_asset(path="/data/lake/orders")]``.

    No I/O: the table may not exist yet when the DAG that creates it is parsed."""
    uri = table_uri(path, storage=storage)
    return Asset(uri=uri, name=name or uri, extra=extra or {})


def convert_asset_to_openlineage(asset: Asset, lineage_context=None):
    """The OpenLineage dataset of a table asset: named like the files under it (OpenLineage's
    naming for file systems and object stores), so a Spark job's own events and ours meet."""
    from airflow_hudi_occ.provider.openlineage import dataset_for_path

    return dataset_for_path(base_path(asset))


def require_table(asset_or_path: Asset | str, storage_options: dict | None = None):
    """The :class:`~airflow_hudi_occ.core.table.table.Table` an asset names; raises
    :class:`TableNotFoundError` naming the asset, the path and the fix when it is not a Hudi
    table (the operators call this on the ``hudi://`` inlets and outlets they are given)."""
    from airflow_hudi_occ.core.table.table import Table

    uri = asset_or_path.uri if isinstance(asset_or_path, Asset) else table_uri(str(asset_or_path))
    path = base_path(uri)
    try:
        return Table.open(path, storage_options or None)
    except TableNotFoundError as e:
        raise TableNotFoundError(
            f"asset {uri} names no Hudi table: {path!r} has no .hoodie/hoodie.properties ({e.message})",
            base_path=path,
            remedy="point the asset at a table's base path (the folder that holds .hoodie/), or "
                   "let a HudiWriteOperator create the table before this task uses it") from e


# --- what the operators do with assets ---------------------------------------------------------


def declare_table_outlet(operator, table_path: str | None):
    """Add the operator's table to its outlets, so that every commit is an event of it.

    Airflow records outlets when it parses the DAG. A literal path becomes the table's asset
    in ``outlets`` (shown in the asset graph before any run). A path known only in ``execute``
    (a ``{{ ... }}`` template, the connection's host) becomes an asset alias
    ``hudi-occ-table:<dag_id>.<task_id>``, to which ``execute`` adds the table's asset with the
    event (Airflow creates the asset if no DAG declared it); skipped when the DAG author
    listed a ``hudi://`` outlet already. A relative literal path gets neither (its table
    depends on the working directory; the write itself runs as before)."""
    if not table_path or "{{" in str(table_path) or "{%" in str(table_path):
        if not any(is_table_asset(o) or _is_our_alias(o) for o in operator.outlets):
            operator.outlets = [*operator.outlets,
                                AssetAlias(name=f"{ALIAS_PREFIX}{operator.dag_id}.{operator.task_id}")]
        return None
    try:
        asset = create_asset(path=str(table_path))
    except InvalidTableUriError as e:
        operator.log.warning("task %s: no asset for its table (%s); it emits no asset event",
                             operator.task_id, e)
        return None
    if not any(isinstance(o, Asset) and o.uri == asset.uri for o in operator.outlets):
        operator.outlets = [*operator.outlets, asset]
    return asset


def _is_our_alias(obj: Any) -> bool:
    return isinstance(obj, AssetAlias) and obj.name.startswith(ALIAS_PREFIX)


def check_table_assets(operator, storage_options: dict | None, own_uri: str | None) -> None:
    """The ``hudi://`` assets the DAG gave the operator, checked before any Spark job: an inlet
    must be a Hudi table; an outlet must be the table the task writes (its event would
    otherwise say that a table changed which this task never touched)."""
    for a in operator.outlets:
        if is_table_asset(a) and own_uri is not None and a.uri != own_uri:
            raise InvalidTableUriError(
                f"outlet {a.uri} of task {operator.task_id} is not the table it writes "
                f"({own_uri})", uri=a.uri,
                remedy="list only the written table's asset in outlets (it is added "
                       "automatically when table_path is a literal path), or make table_path "
                       "and the outlet name the same table")
    for a in operator.inlets:
        if is_table_asset(a):
            require_table(a, storage_options)


#: the actions whose metadata is a commit's (write stats, schema)
_WRITE_ACTIONS = ("commit", "deltacommit", "replacecommit", "clustering")


def metadata_summary(table, instant_time: str | None) -> dict:
    """Row counts, bytes, files, the operation and the schema from the commit metadata of
    ``instant_time`` (the operators' events and the commit watcher's, ``triggers/commits``)."""
    if not instant_time:
        return {}
    timeline = table.timeline()
    inst = timeline.get(instant_time)
    if inst is None or not inst.is_completed:
        return {}
    if inst.action.value not in _WRITE_ACTIONS:  # a clean or a rollback writes no rows
        return {"action": inst.action.value, "completion_time": inst.completion_time}
    md = timeline.commit_metadata(inst)
    stats = md.write_stats()
    return {"action": inst.action.value, "completion_time": inst.completion_time,
            "rows_written": sum(s.num_writes for s in stats),
            "rows_inserted": sum(s.num_inserts for s in stats),
            "rows_updated": sum(s.num_update_writes for s in stats),
            "rows_deleted": sum(s.num_deletes for s in stats),
            "bytes_written": sum(s.file_size_in_bytes for s in stats),
            "files_written": len(stats), "partitions": len(md.partition_to_write_stats),
            "operation_type": md.operation_type, "schema": md.schema}


def commit_summary(table_path: str, storage_options: dict | None, *, instant: str | None,
                   operation: str, outcome: str | None, **more: Any) -> dict:
    """What the asset event's extra and the OpenLineage facets say about one run's commit.

    Read from the commit metadata on the table (not from the job's report), so the counts are
    the ones every Hudi reader sees. A metadata read that fails loses the counts, not the run:
    the commit is already done."""
    out: dict[str, Any] = {"table_uri": _uri_or_none(table_path), "instant": instant,
                           "operation": operation, "outcome": outcome, **more}
    try:
        from airflow_hudi_occ.core.table.table import Table

        out.update(metadata_summary(Table.open(table_path, storage_options or None), instant))
    except Exception as e:  # noqa: BLE001 - the commit succeeded; only its counts are lost
        out["metadata_error"] = f"{type(e).__name__}: {e}"
    return out


def _uri_or_none(path: str) -> str | None:
    try:
        return table_uri(path)
    except InvalidTableUriError:
        return None


def emit_table_event(operator, context, summary: dict) -> bool:
    """Put ``summary`` (less the schema) in the extra of the table's asset event.

    Airflow emits an event for every outlet when the task succeeds; this fills the extra of
    the table's asset, or adds the table's asset to our alias (see
    :func:`declare_table_outlet`) with that extra. A task that fails (a conflict that
    exhausted its retries included) emits none. False when neither is among the outlets."""
    uri = summary.get("table_uri")
    asset = next((o for o in operator.outlets if is_table_asset(o) and o.uri == uri), None)
    alias = next((o for o in operator.outlets if _is_our_alias(o)), None)
    if (asset is None and alias is None) or uri is None:
        operator.log.info("table %s is not in the outlets of %s: no asset event carries this "
                          "commit (list create_asset(path=...) in outlets)", uri, operator.task_id)
        return False
    extra = {k: v for k, v in summary.items() if k != "schema" and v is not None}
    # The commit is done: failing the task here would only make Airflow retry a committed
    # batch. An outlet's event is still emitted by Airflow, without these details.
    try:
        if asset is not None:
            context["outlet_events"][asset].extra.update(extra)
        else:
            context["outlet_events"][alias].add(Asset(uri=uri, name=uri), extra=extra)
    except Exception:  # noqa: BLE001 - a context without outlet_events (a unit-test stub) too
        operator.log.warning("could not set the extra of the asset event of %s", uri, exc_info=True)
        return False
    return True
