"""The Airflow 3 provider: hooks, operators, sensors and triggers for concurrent Hudi writers.

Layering: this package imports ``core`` and starts ``spark`` jobs as separate processes
(spark-submit); neither ``core`` nor ``spark`` imports it. Airflow is imported only here.
"""

__version__ = "0.1.0"
