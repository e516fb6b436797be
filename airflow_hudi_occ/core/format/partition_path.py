"""The one rule for partition paths: how a row's partition values become a path inside the
table, and which paths are refused.

A partition path is built from data (any user's column values) and read back from the
timeline (commit metadata, clustering and compaction plans, markers: files anyone with write
access to ``.hoodie`` could edit), and every file the writers and services create or delete
lives below one. So it is spelled here, and checked here, for every writer (the core
copy-on-write and merge-on-read writers, the Spark engine) and every service; nothing else
builds or trusts one.

Spelling, as Java Hudi's key generators do (``KeyGenUtils.getRecordPartitionPath``):

- a null or empty value is ``__HIVE_DEFAULT_PARTITION__`` (Hudi's
  ``PartitionPathEncodeUtils.DEFAULT_PARTITION_PATH``; the pre-0.12 ``default`` is only
  recognised by Hudi's readers, never written), hive-style or not;
- with the table property ``hoodie.datasource.write.partitionpath.urlencode=true`` a value is
  escaped as Hudi's ``escapePathName`` does (``%XX`` for the control characters and
  ``"#%'*/:=?\\{[]^`` and DEL), so a value's ``/`` never makes a directory;
- hive-style (``hoodie.datasource.write.hive_style_partitioning``) prefixes ``field=``;
- fields are joined with ``/``.

What is refused (:class:`InvalidPartitionPathError`, naming the column and the value's
``repr``), before any instant exists: a spelled path with an empty, ``.`` or ``..`` segment
(a value that is ``..``, starts or ends with ``/``, or holds ``//``: traversal or an absolute
path), a control character or NUL (Hudi escapes them only when url-encoding; unescaped they
make names no tool shows faithfully, and NUL truncates paths in C), a backslash (Windows and
Hadoop's ``Path`` read it as a separator; Hudi's own traversal check does too) and a segment
longer than 255 UTF-8 bytes (every file system's name limit: the write would otherwise fail
half-way, after its instant exists).

A ``/`` inside a value that is not url-encoded is accepted when every segment it makes is
valid: Hudi writes ``2024/01/02`` as nested directories, and readers of existing tables
expect them. ``..`` is refused even when url-encoding (Hudi does not escape ``.``; its own
``validateNoPathTraversal`` refuses it regardless of the setting).

Paths read back from the timeline go through :func:`check_partition_path` (the same segment
rule), and :meth:`Storage.path` refuses any relative path with a ``..`` segment, so a
hostile plan or commit file can make no service read, write or delete outside the table.
"""

from __future__ import annotations

from airflow_hudi_occ.core.errors import InvalidPartitionPathError, UnsafePathError

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
URL_ENCODE_KEY = "hoodie.datasource.write.partitionpath.urlencode"
HIVE_STYLE_KEY = "hoodie.datasource.write.hive_style_partitioning"
#: the longest file or directory name most file systems take (NAME_MAX), in UTF-8 bytes
MAX_SEGMENT_BYTES = 255
#: the longest whole path a local file system takes (Linux PATH_MAX: 4096 with its NUL)
MAX_LOCAL_PATH_BYTES = 4095
#: the longest object key of S3, GCS and Azure blobs: a whole path on an object store
MAX_OBJECT_KEY_BYTES = 1024
OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl", "oss", "cos"})
#: the most a writer adds around a partition path: the marker folder ``.hoodie/.temp/<instant>/``
#: before it (32 bytes), and after it a marker's hidden temporary copy
#: (``/.<fileId>_<token>_<instant>.parquet.marker.CREATE.<uuid hex>.tmp``, about 140), with room
RESERVED_PATH_BYTES = 256

# Hudi's escapePathName set: the ASCII control characters and these (PartitionPathEncodeUtils)
_ESCAPED = frozenset([chr(c) for c in range(0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))
_CONTROL = frozenset(chr(c) for c in range(0x20)) | {"\x7f"}
_FORBIDDEN = _CONTROL | {"\\"}


def escape_path_name(value: str) -> str:
    """Hudi's ``escapePathName``: each character of its escape set as ``%XX`` (two upper-case
    hex digits), everything else (``.``, spaces, non-ASCII) as it is."""
    if not any(c in _ESCAPED for c in value):
        return value
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def value_text(value) -> str:
    """A partition value as Hudi writes it before escaping: ``str()``, the Hive default for a
    null or empty one."""
    if value is None:
        return DEFAULT_PARTITION
    text = str(value)
    return text if text else DEFAULT_PARTITION


def segment_problem(segment: str) -> str | None:
    """Why one path segment may not name a folder of the table, or None."""
    if segment in ("", ".", ".."):
        return {"": "an empty path segment (a leading, trailing or double '/')",
                ".": "a '.' path segment", ".." : "a '..' path segment (it leaves the folder)"}[segment]
    bad = sorted({c for c in segment if c in _FORBIDDEN})
    if bad:
        return ("a backslash (a path separator to Windows and Hadoop)" if bad == ["\\"]
                else f"the control character(s) {', '.join(repr(c) for c in bad)}")
    if len(segment.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES:
        return f"a path segment longer than {MAX_SEGMENT_BYTES} bytes (the file-system name limit)"
    return None


def path_problem(path: str) -> str | None:
    """Why a relative partition path is not safe to create files under, or None (``''``, the
    root of a non-partitioned table, is safe)."""
    if path == "":
        return None
    for seg in path.split("/"):
        problem = segment_problem(seg)
        if problem is not None:
            return problem
    return None


def field_text(field: str, value, *, hive_style: bool, url_encode: bool) -> str:
    """What one partition field contributes to the path: Hudi's spelling, checked.

    Raises :class:`InvalidPartitionPathError` naming ``field`` and ``value`` when the text would
    not stay one or more valid folders inside the table."""
    text = value_text(value)
    if url_encode:
        text = escape_path_name(text)
    spelled = f"{field}={text}" if hive_style else text
    problem = path_problem(spelled)
    if problem is not None:
        raise InvalidPartitionPathError(
            f"partition column {field!r} has the value {_shown(value)}, which would make the "
            f"partition path {_shown(spelled)} with {problem}; nothing was written", column=field,
            value=repr(value), path=spelled, remedy=_remedy(field, text, hive_style, url_encode))
    return spelled


def join_fields(texts) -> str:
    """The partition path of one row from its fields' :func:`field_text`."""
    return "/".join(texts)


def partition_path(fields, values, *, hive_style: bool, url_encode: bool) -> str:
    """The partition path of one row (``values`` in ``fields`` order); ``''`` without fields."""
    return join_fields(field_text(f, v, hive_style=hive_style, url_encode=url_encode)
                       for f, v in zip(fields, values))


def max_partition_path_bytes(root: str, protocol: str) -> int:
    """The longest partition path (UTF-8 bytes) whose files fit the store's path limit under a
    table rooted at ``root``: :data:`MAX_LOCAL_PATH_BYTES` (or, on an object store,
    :data:`MAX_OBJECT_KEY_BYTES`; the bucket counted in, which errs short) less the root and
    :data:`RESERVED_PATH_BYTES`."""
    limit = MAX_OBJECT_KEY_BYTES if protocol in OBJECT_STORES else MAX_LOCAL_PATH_BYTES
    return limit - len(root.encode("utf-8", "surrogatepass")) - 1 - RESERVED_PATH_BYTES


def check_path_length(path: str, fields: dict, *, root: str, protocol: str) -> str:
    """``path`` (a row's partition path; ``fields``: each partition field's ``(value, text)``,
    the text its :func:`field_text`) when the files written below it fit the store's path
    limit (:func:`max_partition_path_bytes`); else :class:`InvalidPartitionPathError` naming
    the field of the longest text and its value. Each segment may be valid while the whole is
    not: a 10,000-character value holding ``/`` made segments under 255 bytes each and failed
    with ``OSError: File name too long`` after the write's instant existed."""
    limit = max_partition_path_bytes(root, protocol)
    size = len(path.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return path
    field = max(fields, key=lambda f: len(fields[f][1]))
    value = fields[field][0]
    store = MAX_OBJECT_KEY_BYTES if protocol in OBJECT_STORES else MAX_LOCAL_PATH_BYTES
    raise InvalidPartitionPathError(
        f"partition column {field!r} has the value {_shown(value)}, which makes the partition "
        f"path {size} bytes long: under the table at {root!r} its files' paths would be longer "
        f"than the {store} bytes the store takes for a {'key' if protocol in OBJECT_STORES else 'path'}; "
        "nothing was written", column=field, value=repr(value), path=path,
        remedy=f"keep partition paths under {max(limit, 0)} bytes at this table: clean or remap "
               "the long values upstream (or partition by a shorter column, such as a date or a "
               "hash of the value)")


def leaves_problem(path: str) -> str | None:
    """Why a relative path read from the table's own files would leave (or not name a folder
    of) the table, or None. Looser than :func:`path_problem` on purpose: a table Java Hudi
    wrote may hold names this library refuses to create (a control character, a backslash
    without url-encoding), and reading it must keep working; leaving the table never does.
    A backslash counts as a separator for ``..``, as in Hudi's ``hasPathTraversal``."""
    if path == "":
        return None
    for seg in path.split("/"):
        if seg in ("", ".", ".."):
            return segment_problem(seg)
    if ".." in path.replace("\\", "/").split("/"):
        return segment_problem("..")
    return None


def check_partition_path(path: str, *, source: str) -> str:
    """``path`` when it stays inside the table (:func:`leaves_problem`), else
    :class:`UnsafePathError` naming where it was read (``source``: a commit file, a plan).
    For the paths the table's own files name, checked as they are decoded, so that no
    service acts on a hostile plan's path."""
    if not isinstance(path, str):
        raise UnsafePathError(f"{source} names a partition path that is not a string: {path!r}",
                              path=repr(path), source=source)
    problem = leaves_problem(path)
    if problem is not None:
        raise UnsafePathError(
            f"{source} names the partition path {path!r}, which has {problem}; nothing was "
            "read, written or deleted there", path=path, source=source)
    return path


def check_relative_path(path: str, *, source: str) -> str:
    """``path`` (a file's path relative to the table, e.g. a commit's write stat) when it
    cannot leave the table: its folder passes :func:`check_partition_path` and its name is a
    plain file name."""
    folder, _, name = path.rpartition("/") if isinstance(path, str) else ("", "", path)
    check_partition_path(folder, source=source)
    if not isinstance(name, str) or leaves_problem(name) is not None or name == "":
        raise UnsafePathError(f"{source} names the file {path!r}, which is not a file name "
                              "inside the table; nothing was read, written or deleted there",
                              path=repr(path), source=source)
    return path


def _shown(value, limit: int = 120) -> str:
    """``repr(value)``, cut for the message when very long (the error's ``value`` field keeps
    it whole): a 10 kB value would drown the reason."""
    r = repr(value)
    return r if len(r) <= limit else f"{r[:limit]}... ({len(str(value))} characters)"


def _remedy(field: str, text: str, hive_style: bool, url_encode: bool) -> str:
    fix = "clean or remap the value upstream (or in the DataFrame before the write)"
    encoded = escape_path_name(text)
    if url_encode or path_problem(f"{field}={encoded}" if hive_style else encoded) is not None:
        return fix  # encoding would not save it ('..', a name too long)
    return (f"{fix}, or keep such values by writing a new table created with "
            f"{URL_ENCODE_KEY}=true (Table.create(..., url_encode_partitions=True)), where "
            f"this one is spelled {encoded!r} as Java Hudi spells it")


__all__ = ["DEFAULT_PARTITION", "URL_ENCODE_KEY", "MAX_SEGMENT_BYTES", "MAX_LOCAL_PATH_BYTES",
           "MAX_OBJECT_KEY_BYTES", "RESERVED_PATH_BYTES", "max_partition_path_bytes", "check_path_length",
           "escape_path_name",
           "value_text", "segment_problem", "path_problem", "leaves_problem", "field_text", "join_fields",
           "partition_path", "check_partition_path", "check_relative_path"]
