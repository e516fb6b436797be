"""The PySpark engine: tagging on the driver, one base file per file group on executors,
the OCC transaction (lock, heartbeat, conflict resolution, rollback) on the driver.

This layer imports :mod:`airflow_hudi_occ.core` and pyspark; core never imports it.
"""
