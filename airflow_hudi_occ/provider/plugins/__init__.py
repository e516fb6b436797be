"""Airflow plugins of the provider (loaded from the ``airflow.plugins`` entry point)."""
