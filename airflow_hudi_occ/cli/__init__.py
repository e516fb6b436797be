"""``hudi-occ``, the command line: arguments and rendering around core (app.py has the usage)."""

from airflow_hudi_occ.cli.app import build_parser, main
from airflow_hudi_occ.cli.render import render_table

__all__ = ["main", "build_parser", "render_table"]
