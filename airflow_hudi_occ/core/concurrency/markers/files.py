"""Batched marker files (``MARKERS0..N``): tolerant parsing, cached by (size, mtime).

A batched file may be read while it is being replaced on a backend without atomic replace, so
a short, empty or cut file is read as far as it makes sense and a line that is not a marker is
skipped; the next reading catches up (RFC-56: "treat it as empty for this round").
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from airflow_hudi_occ.core.concurrency.markers.names import (MARKER_INFIX, MARKER_SUFFIXES, Marker, group_key,
                                                            group_of_line, split_group_key, try_parse_marker)


class MarkerFileContent:
    """The complete marker lines of one MARKERS file, with derived views built on demand
    (a checker mostly needs only :attr:`keys`)."""

    __slots__ = ("_text", "_lines", "_keys", "_groups", "_by_partition", "_markers")

    def __init__(self, text: str = ""):
        self._text = text
        self._lines: tuple[str, ...] | None = None
        self._keys: frozenset[str] | set[str] | None = None
        self._groups: frozenset[tuple[str, str]] | None = None
        self._by_partition: dict[str, frozenset[str]] | None = None
        self._markers: tuple[Marker, ...] | None = None

    @property
    def lines(self) -> tuple[str, ...]:
        if self._lines is None:
            self._lines = _lines_of(self._text)
        return self._lines

    @property
    def keys(self) -> "frozenset[str] | set[str]":
        """:func:`group_key` of every marker in the file (do not modify)."""
        if self._keys is None:
            self._keys = _keys_of_text(self._text, lambda: self.lines)
        return self._keys

    @property
    def file_groups(self) -> frozenset[tuple[str, str]]:
        if self._groups is None:
            self._groups = frozenset(split_group_key(k) for k in self.keys)
        return self._groups

    def file_ids_by_partition(self) -> dict[str, frozenset[str]]:
        if self._by_partition is None:
            acc: dict[str, set[str]] = {}
            for part, fid in self.file_groups:
                acc.setdefault(part, set()).add(fid)
            self._by_partition = {p: frozenset(v) for p, v in acc.items()}
        return self._by_partition

    @property
    def markers(self) -> tuple[Marker, ...]:
        if self._markers is None:
            out = []
            for line in self.lines:
                m = try_parse_marker(line)
                if m is not None:
                    out.append(m)
            self._markers = tuple(out)
        return self._markers


EMPTY_CONTENT = MarkerFileContent("")


def parse_marker_lines(data: bytes) -> tuple[str, ...]:
    """Marker lines of a MARKERS file's bytes; never raises.

    Lines that do not end in a marker suffix are skipped. That also drops a last line cut
    mid-way by a concurrent rewrite: a cut line cannot end in ``.marker.<TYPE>`` unless the cut
    fell exactly before its newline, in which case the line is whole and is kept.
    """
    return _lines_of(data.decode("utf-8", errors="replace")) if data else ()


def _lines_of(text: str) -> tuple[str, ...]:
    if "\r" in text:  # written on Windows: tolerate CRLF
        text = text.replace("\r\n", "\n")
    return tuple([line for line in text.split("\n") if line.endswith(MARKER_SUFFIXES)])


def _keys_of_text(text: str, lines) -> frozenset[str] | set[str]:
    """The group keys of a MARKERS file's text, in bulk.

    The fast path cuts each marker line at the first ``_`` after its last ``/`` (a base file is
    ``<fileId>_<token>_<t>.<ext>``), in one comprehension over the text. Two shapes it gets
    wrong are detected with whole-text searches (C speed) and sent down the exact per-line
    path instead: log-file names, which start with a dot, and names without any ``_`` (the
    cut then runs into the marker suffix). ``lines`` gives the parsed lines for that path.
    """
    if "/." not in text and "\n." not in text and not text.startswith(".") and "\r" not in text:
        keys = {line[:line.find("_", line.rfind("/") + 1)]
                for line in text.split("\n") if line.endswith(MARKER_SUFFIXES)}
        if MARKER_INFIX not in "\n".join(keys):
            return keys
    return frozenset(group_key(*group_of_line(line)) for line in lines())


_CACHE_LOCK = threading.Lock()
_FILE_CACHE: "OrderedDict[tuple[str, str], tuple[tuple[int, int], MarkerFileContent]]" = OrderedDict()
_FILE_CACHE_SIZE = 8192


def stat_key(storage, path: str) -> tuple[int, int] | None:
    """(size, mtime in ns) of a file, or None if it is missing or the backend gives no mtime."""
    try:
        if storage.is_local:
            st = os.stat(path)
            return (st.st_size, st.st_mtime_ns)
        return (storage.size(path), int(storage.mtime(path) * 1e9))
    except FileNotFoundError:
        return None
    except Exception:  # a backend without modification times: read, do not cache
        return None


def read_marker_file(storage, path: str) -> MarkerFileContent:
    """The content of one MARKERS file, cached while its (size, mtime) do not change.

    A MARKERS file only ever grows (its writer appends and replaces it whole), so a new version
    always differs in size, and a cached parse can never hide a newer marker. A read that does
    not match the size seen just before it (the file was being replaced) is used for this
    round but not cached. A missing file reads as empty.
    """
    key = stat_key(storage, path)
    ck = (storage.protocol, path)
    if key is not None:
        with _CACHE_LOCK:
            hit = _FILE_CACHE.get(ck)
            if hit is not None and hit[0] == key:
                _FILE_CACHE.move_to_end(ck)
                return hit[1]
    try:
        data = storage.read(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return EMPTY_CONTENT
    except OSError:
        return EMPTY_CONTENT  # RFC-56: a file we cannot read this round is empty this round
    content = MarkerFileContent(data.decode("utf-8", errors="replace"))
    if key is not None and len(data) == key[0]:
        with _CACHE_LOCK:
            _FILE_CACHE[ck] = (key, content)
            _FILE_CACHE.move_to_end(ck)
            while len(_FILE_CACHE) > _FILE_CACHE_SIZE:
                _FILE_CACHE.popitem(last=False)
    return content


def clear_cache() -> None:
    """Forget every parsed MARKERS file (a cold reader: benchmarks, tests)."""
    with _CACHE_LOCK:
        _FILE_CACHE.clear()
