"""A Hudi table as it is on storage: ``hoodie.properties``, the timeline and the file-system view.

``from airflow_hudi_occ.core.table import Table`` (the 0.1 path) keeps working: the names of
:mod:`airflow_hudi_occ.core.table.table` are re-exported here.
"""

from airflow_hudi_occ.core.table.table import *  # noqa: F401,F403
from airflow_hudi_occ.core.table.table import (META_COLUMNS, META_FOLDER, PARTITION_METADATA_FILE,  # noqa: F401
                                               PROPERTIES_FILE, READABLE_VERSIONS, WRITABLE_VERSION,
                                               Table, TableConfig, parse_properties, render_properties,
                                               table_checksum)
