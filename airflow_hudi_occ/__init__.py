"""airflow_hudi_occ: multi-writer optimistic concurrency control for Apache Hudi tables.

Layers (imports point downward only):

- :mod:`airflow_hudi_occ.core`: the shared library (table format, timeline, locks, OCC, early
  conflict detection). Pure Python on fsspec; imports neither Spark nor Airflow.
- :mod:`airflow_hudi_occ.spark`: the PySpark engine.
- :mod:`airflow_hudi_occ.airflow`: the Airflow 3 provider and UI plugin.
"""

__version__ = "0.1.0"
