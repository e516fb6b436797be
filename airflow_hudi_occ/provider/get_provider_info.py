"""What Airflow's ProvidersManager learns about this package (the ``apache_airflow_provider``
entry point). Kept importable without Airflow: the providers manager calls it while Airflow
itself is starting."""

from __future__ import annotations

INTEGRATION = "Apache Hudi (OCC)"


def get_provider_info() -> dict:
    from airflow_hudi_occ.provider import __version__
    return {
        "package-name": "airflow-hudi-occ",
        "name": "Apache Hudi OCC",
        "description": "Concurrent writers for Apache Hudi copy-on-write tables: optimistic "
                       "concurrency control with conflict retries on fresh instants, early "
                       "conflict detection, write windows and table services under the table lock.",
        "versions": [__version__],
        "integrations": [{
            "integration-name": INTEGRATION,
            "external-doc-url": "https://hudi.apache.org/docs/concurrency_control",
            "tags": ["apache"],
        }],
        "hooks": [{"integration-name": INTEGRATION,
                   "python-modules": ["airflow_hudi_occ.provider.hooks.hudi_occ"]}],
        "operators": [{"integration-name": INTEGRATION,
                       "python-modules": ["airflow_hudi_occ.provider.operators.hudi_occ"]}],
        "sensors": [{"integration-name": INTEGRATION,
                     "python-modules": ["airflow_hudi_occ.provider.sensors.hudi_occ"]}],
        "triggers": [{"integration-name": INTEGRATION,
                      "python-modules": ["airflow_hudi_occ.provider.triggers.hudi_occ"]}],
        "connection-types": [
            {
                "connection-type": "hudi_occ",
                "hook-class-name": "airflow_hudi_occ.provider.hooks.hudi_occ.HudiOccHook",
                "hook-name": "Hudi table (OCC)",
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "login", "password", "port"],
                    "relabeling": {"host": "Table base path (file://, s3://, gs://, ...)"},
                    "placeholders": {
                        "host": "/data/lake/orders",
                        "extra": '{"storage_options": {}, "lock_provider": "zookeeper", '
                                 '"zookeeper_conn_id": "hudi_zookeeper_default", '
                                 '"options": {"hoodie.write.concurrency.early.conflict.detection.enable": "true"}}',
                    },
                },
                "conn-fields": {
                    "lock_provider": {"label": "Lock provider",
                                      "description": "zookeeper | filesystem | inprocess, or a Hudi lock provider class",
                                      "schema": {"type": ["string", "null"], "default": "filesystem"}},
                    "zookeeper_conn_id": {"label": "ZooKeeper connection id",
                                          "description": "used when the lock provider is zookeeper",
                                          "schema": {"type": ["string", "null"]}},
                    "storage_options": {"label": "Storage options (JSON)",
                                        "description": "fsspec storage options for the table's file system",
                                        "schema": {"type": ["object", "string", "null"]}},
                },
            },
            {
                "connection-type": "hudi_zookeeper",
                "hook-class-name": "airflow_hudi_occ.provider.hooks.hudi_occ.HudiZooKeeperHook",
                "hook-name": "ZooKeeper (Hudi lock)",
                "ui-field-behaviour": {
                    "hidden-fields": [],
                    "relabeling": {"host": "Hosts (host1:2181,host2:2181)", "schema": "Lock base path",
                                   "login": "Digest user", "password": "Digest password"},
                    "placeholders": {"host": "zk1:2181,zk2:2181", "port": "2181", "schema": "/hudi/locks"},
                },
                "conn-fields": {
                    "lock_key": {"label": "Lock key", "description": "defaults to the table name",
                                 "schema": {"type": ["string", "null"]}},
                    "session_timeout_ms": {"label": "Session timeout (ms)",
                                           "schema": {"type": ["integer", "null"], "default": 60000}},
                    "connection_timeout_ms": {"label": "Connection timeout (ms)",
                                              "schema": {"type": ["integer", "null"], "default": 15000}},
                },
            },
        ],
        "extra-links": ["airflow_hudi_occ.provider.links.HudiTimelineLink"],
        "plugins": [{"name": "hudi_occ",
                     "plugin-class": "airflow_hudi_occ.provider.plugins.timeline.HudiOccTimelinePlugin"}],
    }
