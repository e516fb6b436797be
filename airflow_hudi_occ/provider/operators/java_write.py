"""The write operator for Java Hudi: a user's own ``df.write.format("hudi")`` job, run with OCC.

:class:`HudiJavaWriteOperator` is :class:`HudiWriteOperator` with the Java Hudi launcher
(``provider/launchers/java.py``) built from its own arguments: the user's application, its
arguments, the Spark install and bundle that carry Java Hudi; no ``source``, ``source_format``
or ``operation``, which the user's script decides. What both share is the attempt loop
(``provider/attempt_loop.py``): the batch key looked up before every attempt (an Airflow retry
or re-run of a committed batch submits nothing), conflict retries on fresh instants within
``conflict_retries``, write windows, admission, the XCom attempt list, assets and lineage,
``on_kill`` ending the whole Spark process tree.

How each attempt runs and is decided (the ``hudi-defaults.conf`` of the attempt, the outcome
read from the table and the job's output, the running record, the abort watch, deferral) is
the launcher's: ``provider/launchers/java.py``.

Not (yet) here: the commit-time "batch already committed?" check under the lock that our
engine makes (two live attempts of one batch that touch different file groups could both
commit; Airflow runs one try of a task at a time); other stores' settings (give Java their
Hadoop settings in ``spark_conf``).
"""

from __future__ import annotations

from typing import Any

from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.provider.launchers.java import JavaHudiLauncher
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator


class HudiJavaWriteOperator(HudiWriteOperator):
    """Run a user's Java Hudi datasource job (PySpark script or JAR) as one OCC write.

    ``application`` (the script or JAR, unmodified), ``application_args``, ``java_class`` and
    the ``spark`` arguments (``spark_submit``, ``spark_home``, ``python``, ``hudi_bundle``,
    ``jars``, ``spark_conn_id``, ``spark_conf``, ``spark_env``, ``poll_interval``,
    ``instant_wait_s``) build the
    :class:`~airflow_hudi_occ.provider.launchers.java.JavaHudiLauncher`, which documents them.
    ``options`` are ``hoodie.*`` options for Java (templated), over the connections'; not
    checked against this project's keys (Java checks its own). Other arguments as
    :class:`HudiWriteOperator` (``table_path``, ``hudi_conn_id``, ``conflict_retries``,
    ``batch_key``, ``checkpoint``, ``write_windows``, ``admission``, ``deferrable``). The table
    path is where the operator reads the outcome and the batch key.
    """

    ui_color = "#ffe9cc"

    #: the launcher's arguments this operator takes by name
    LAUNCHER_ARGS = ("spark_submit", "spark_home", "python", "hudi_bundle", "jars", "spark_conn_id",
                     "spark_conf", "spark_env", "poll_interval", "instant_wait_s")

    def __init__(self, *, application: str, application_args: list[str] | None = None,
                 java_class: str | None = None, options: dict[str, Any] | None = None, **kwargs):
        for given in ("source", "source_format", "operation", "launcher"):
            if given in kwargs:
                raise ConfigError(f"HudiJavaWriteOperator takes no {given}: the Java job decides it",
                                  key=given, remedy=f"remove {given}= (the application writes what it writes)")
        spark = {k: kwargs.pop(k) for k in self.LAUNCHER_ARGS if k in kwargs}
        launcher = JavaHudiLauncher(application=application, application_args=application_args,
                                    java_class=java_class, **spark)
        # "java" until a commit says which operation it was
        super().__init__(source=None, operation="java", options=options, launcher=launcher, **kwargs)
