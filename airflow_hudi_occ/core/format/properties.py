"""``hoodie.properties``: Java's ``Properties`` text format, read and written with the
``javaproperties`` library (escapes, continuation lines, ``=``/``:`` separators, characters
beyond U+FFFF written as Java's UTF-16 surrogate pairs), and Hudi's table checksum.

One departure from a lenient reader: a malformed ``\\uXXXX`` escape is refused with
:class:`CorruptMetadataError`, as Java's ``Properties.load`` refuses it (Java Hudi could not
open such a table either), instead of being read as some other text.
"""

from __future__ import annotations

import zlib
from datetime import datetime, timezone
from typing import Mapping

import javaproperties

from airflow_hudi_occ.core.errors import CorruptMetadataError


def parse_properties(text: str, path: str | None = None) -> dict[str, str]:
    """The key/value pairs of Java ``.properties`` text."""
    try:
        return javaproperties.loads(text)
    except ValueError as e:  # javaproperties.InvalidUEscapeError
        raise CorruptMetadataError(f"properties file {path or ''} is not valid Java properties "
                                   f"text: {e}", path=path,
                                   remedy="restore hoodie.properties from hoodie.properties.backup "
                                          "or from a copy of the table") from e


def render_properties(props: Mapping[str, str], comment: str | None = None) -> str:
    """Java ``.properties`` text, keys sorted, with the two comment lines Java writes."""
    now = datetime.now(timezone.utc)
    return javaproperties.dumps({k: str(props[k]) for k in sorted(props)},
                                comments=comment or f"Properties saved on {now.isoformat()}",
                                timestamp=now, sort_keys=False)


def table_checksum(table_name: str, database: str | None) -> int:
    """``hoodie.table.checksum`` as Java Hudi computes it: CRC32 of ``[database.]table``."""
    name = f"{database}.{table_name}" if database else table_name
    return zlib.crc32(name.encode("utf-8"))


__all__ = ["parse_properties", "render_properties", "table_checksum"]
