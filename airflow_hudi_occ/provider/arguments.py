"""The operators' arguments, checked when the DAG file is parsed.

Why at parse time: a DAG with ``operation="upsertt"`` or ``hoodie.write.lock.providr`` should
not be scheduled at all. Airflow shows an exception raised in an operator's constructor as
an import error of the DAG file (in the UI, ``airflow dags list-import-errors`` and
``airflow dags test``), naming the task, the argument and the fix, before any run, any Spark
start, any write. Values that are Jinja templates (``"{{ params.op }}"``) and what the
Airflow connection adds are only known at run time; the operator checks the complete options
again in ``execute`` and the Spark job once more before its session starts.

Nothing here reads a connection or the table: parsing a DAG file must stay cheap and offline.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Mapping

from airflow_hudi_occ.core.commit.write_options import check_write_options
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.spark.submit.options import SparkWriteOptions
from airflow_hudi_occ.core.config import OPERATIONS
from airflow_hudi_occ.spark.submit.source import SOURCE_FORMATS


def is_templated(value: Any) -> bool:
    """Whether Airflow renders ``value`` at run time (a Jinja expression or statement)."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def static_options(options: Mapping[str, Any] | None) -> dict[str, str]:
    """The options whose key and value are known when the DAG is parsed."""
    return {str(k): str(v) for k, v in (options or {}).items()
            if v is not None and not is_templated(k) and not is_templated(v)}


def _where(operator: str, task_id: str) -> str:
    return f"{operator}(task_id={task_id!r})"


def _choice(where: str, name: str, value: Any, allowed: Iterable[str]) -> None:
    allowed = list(allowed)
    if is_templated(value) or value in allowed:
        return
    hint = difflib.get_close_matches(str(value), allowed, n=1, cutoff=0.6)
    raise ConfigError(f"{where}: {name}={value!r} is not one of {allowed}"
                      + (f": did you mean {hint[0]!r}?" if hint else ""), key=name, value=value,
                      remedy=f"set {name} to " + (repr(hint[0]) if hint else f"one of {allowed}"))


def _number(where: str, name: str, value: Any, *, minimum: float, integer: bool = False,
            strict: bool = False) -> None:
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type:
        raise ConfigError(f"{where}: {name} must be {kind}, got {value!r}", key=name, value=value,
                          remedy=f"pass {name} as {kind} (not a string)")
    if value < minimum or (strict and value == minimum):
        bound = f"greater than {minimum}" if strict else f"at least {minimum}"
        raise ConfigError(f"{where}: {name} must be {bound}, got {value!r}", key=name, value=value,
                          remedy=f"set {name} to a value {bound}")


def _options(where: str, options: Mapping[str, Any] | None, *, spark: bool, write: bool = False) -> None:
    if options is not None and not isinstance(options, Mapping):
        if not isinstance(options, (str, list, tuple, set)):
            return  # an XComArg or another value Airflow resolves at run time
        if is_templated(options):
            return
        raise ConfigError(f"{where}: options must be a dict of hoodie.* keys, got "
                          f"{type(options).__name__}", key="options",
                          remedy='pass options={"hoodie....": "value"}')
    static = static_options(options)
    try:
        if spark:
            o = SparkWriteOptions.from_options(static, partial=True)
            if write:
                o.check_writable()
        else:
            check_write_options(static, partial=True)
    except ConfigError as e:
        raise type(e)(f"{where}: {getattr(e, 'message', str(e))}", key=getattr(e, "key", None),
                      value=getattr(e, "value", None), remedy=e.remedy) from None


def check_engine_write_arguments(task_id: str, *, operation: Any, source: Any, source_format: Any,
                                 options: Mapping[str, Any] | None) -> None:
    """What the engine's job reads (``spark/job.py``): raise :class:`ConfigError` naming the
    task, the argument and the fix."""
    where = _where("HudiWriteOperator", task_id)
    _choice(where, "operation", operation, OPERATIONS)
    _choice(where, "source_format", source_format, SOURCE_FORMATS)
    if source is None or (isinstance(source, str) and not source.strip()):
        raise ConfigError(f"{where}: source must be a path or (with source_format='sql') a query, "
                          f"got {source!r}", key="source", value=source,
                          remedy="pass the input path, e.g. source='/landing/{{ ds }}/'")
    _options(where, options, spark=True, write=True)


def check_loop_arguments(task_id: str, *, conflict_retries: Any, write_windows: Any) -> None:
    """The attempt loop's settings (``provider/attempt_loop.py``): the conflict-retry policy
    and the write windows' wait, each number named as the user wrote it."""
    where = _where("HudiWriteOperator", task_id)
    if hasattr(conflict_retries, "max_conflict_retries"):  # a RetryPolicy
        _number(where, "conflict_retries.max_conflict_retries", conflict_retries.max_conflict_retries,
                minimum=0, integer=True)
        _number(where, "conflict_retries.base_delay_s", conflict_retries.base_delay_s, minimum=0)
        _number(where, "conflict_retries.max_delay_s", conflict_retries.max_delay_s,
                minimum=conflict_retries.base_delay_s)
    elif conflict_retries is not None:  # a number: the default backoff (None: the options'
        # hoodie.write.num.retries.on.conflict.failures, else 5)
        _number(where, "conflict_retries", conflict_retries, minimum=0, integer=True)
    if write_windows is not None:
        _number(where, "write_windows.timeout_s", write_windows.timeout_s, minimum=0)
        _number(where, "write_windows.poll_s", write_windows.poll_s, minimum=0, strict=True)


def check_service_arguments(task_id: str, *, service: Any, services: Iterable[str],
                            options: Mapping[str, Any] | None) -> None:
    where = _where("HudiTableServiceOperator", task_id)
    _choice(where, "service", service, services)
    _options(where, options, spark=True)


def check_sensor_options(sensor: str, task_id: str, options: Mapping[str, Any] | None) -> None:
    """A sensor's ``hoodie.*`` options (it reads the table with the writers' lock and keys)."""
    _options(_where(sensor, task_id), options, spark=True)
