"""Regenerate the generated section of docs/configuration.md from the pinned Hudi option set
(airflow_hudi_occ/core/hudi_options.json) and the statuses kept in core/hudi_options.py:
``python scripts/hudi_options/write_doc.py docs/configuration.md`` (run by
scripts/regenerate-hudi-options.sh). The hand-written rest of the file is kept as it is."""

import sys
from pathlib import Path

from airflow_hudi_occ.core import config, hudi_options


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/hudi_options/write_doc.py docs/configuration.md", file=sys.stderr)
        return 2
    path = Path(argv[0])
    text = path.read_text(encoding="utf-8")
    path.write_text(hudi_options.generated_doc(text, config.honored_keys(), config.ACCEPTED_HUDI_KEYS),
                    encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
