"""The submit side of the Spark engine: what a process needs to submit a job, without pyspark.

The provider (an Airflow worker, the triggerer, the DAG processor) imports this package and
never the engine proper: the write options and their checks (``options``), the master probe
(``master``), the project's session defaults for ``--conf`` (``conf``), the package zip for
``--py-files`` (``package``), the source check (``source``), and their errors (``errors``).
Its modules import only ``core`` and each other, never pyspark nor the rest of ``spark``
(``tests/test_layers.py``, rule f); the engine imports them from here.
"""
