"""Benchmarks of airflow_hudi_occ: every figure is a ratio against a baseline of the same run.

Run ``.venv/bin/python -m bench`` from the repository root (``--quick`` for a smoke run,
``--only NAME`` for one benchmark, ``--json PATH`` for the figures as JSON; by default they
also go to ``bench/out/results.json``, which git ignores). One module per benchmark, listed in
:data:`bench.runner.BENCHMARKS`; each has ``NAME``, ``figure_names(quick)`` and
``run(ctx) -> list[Figure]``, and its docstring says what is built, what is measured and
against which baseline.
"""

from __future__ import annotations

from .runner import BENCHMARKS, Context, run_all

__all__ = ["BENCHMARKS", "Context", "run_all"]
