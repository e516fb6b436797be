"""The shared library: Hudi v8 copy-on-write format, timeline and the multi-writer protocol.

Pure Python on fsspec, fastavro, kazoo and pyarrow. Nothing here imports Spark or Airflow, so
the same code serves a Spark executor, a driver, an Airflow sensor in the triggerer and the UI.
"""
