"""Moved to :mod:`airflow_hudi_occ.spark.submit.master` (the submit side, no pyspark); this
path stays importable."""

from airflow_hudi_occ.spark.submit.master import (DEFAULT_PORT, check_master_reachable,  # noqa: F401
                                                  is_local_master, master_addresses)
