"""``hudi-occ``, the command line: arguments and rendering around core (app.py has the usage).

``main`` is here because it is the console script's entry point (``hudi-occ =
"airflow_hudi_occ.cli:main"`` in pyproject.toml): the one name this package re-exports.
"""

from airflow_hudi_occ.cli.app import main

__all__ = ["main"]
