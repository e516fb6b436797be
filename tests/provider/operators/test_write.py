"""The write operator's shape after the split of the attempt loop from its launchers
(``provider/attempt_loop.py``, ``provider/launchers/``): a small class, a short constructor,
and no subclass that reaches into it by overriding a private method (an engine or platform
is a launcher, not a subclass)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import airflow_hudi_occ.provider as provider
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator

MAX_METHODS = 15
MAX_PARAMETERS = 15


def methods(cls) -> list[str]:
    """What the class body itself defines that is called: functions, static and class
    methods, properties (inherited ones do not count)."""
    return sorted(n for n, v in vars(cls).items()
                  if inspect.isfunction(v) or isinstance(v, (staticmethod, classmethod, property)))


def constructor_parameters(cls) -> list[str]:
    """``__init__``'s parameters but ``self`` (``**kwargs`` counts as one)."""
    return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]


def private_overrides(cls) -> list[str]:
    """Names with one leading underscore that ``cls`` defines and a base class defines too."""
    own = [n for n, v in vars(cls).items() if n.startswith("_") and not n.startswith("__") and callable(v)]
    return sorted(n for n in own if any(n in vars(base) for base in cls.__mro__[1:]))


def subclasses(cls) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *subclasses(sub)]
    return out


def test_the_write_operator_has_at_most_15_methods_and_15_constructor_parameters():
    assert len(methods(HudiWriteOperator)) <= MAX_METHODS, methods(HudiWriteOperator)
    assert len(constructor_parameters(HudiWriteOperator)) <= MAX_PARAMETERS, constructor_parameters(HudiWriteOperator)


def test_no_subclass_of_the_write_operator_overrides_a_private_method():
    for info in pkgutil.walk_packages(provider.__path__, provider.__name__ + "."):
        importlib.import_module(info.name)  # every operator the package defines is a subclass now
    subs = subclasses(HudiWriteOperator)
    assert "HudiJavaWriteOperator" in {s.__name__ for s in subs}
    for cls in [HudiWriteOperator, *subs]:
        assert private_overrides(cls) == [], cls


def test_the_checks_see_what_they_are_for():
    """The counts and the override check on a class made to break them."""
    class Wide(HudiWriteOperator):
        def __init__(self, *, a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, **kwargs):  # noqa: E741
            super().__init__(**kwargs)

        def _do_render_template_fields(self, *args, **kwargs):  # a private method of Airflow's
            return super()._do_render_template_fields(*args, **kwargs)

        @property
        def shown(self):
            return 1

    assert len(constructor_parameters(Wide)) == 17
    assert private_overrides(Wide) == ["_do_render_template_fields"]
    assert methods(Wide) == ["__init__", "_do_render_template_fields", "shown"]


def test_a_wrong_number_in_the_loop_settings_names_the_argument_when_the_dag_is_parsed():
    import pytest

    from airflow_hudi_occ.core.commit.retry import RetryPolicy
    from airflow_hudi_occ.core.errors import ConfigError
    from airflow_hudi_occ.provider.write_window import WriteWindows

    common = dict(source="/landing/b.parquet", table_path="/t", hudi_conn_id=None)
    with pytest.raises(ConfigError, match=r"conflict_retries must be an integer, got '5'"):
        HudiWriteOperator(task_id="a", conflict_retries="5", **common)
    with pytest.raises(ConfigError, match=r"conflict_retries.max_delay_s must be at least 10"):
        HudiWriteOperator(task_id="b", conflict_retries=RetryPolicy(base_delay_s=10, max_delay_s=1), **common)
    with pytest.raises(ConfigError, match=r"write_windows.poll_s must be greater than 0"):
        HudiWriteOperator(task_id="c", write_windows=WriteWindows(poll_s=0), **common)
    op = HudiWriteOperator(task_id="d", conflict_retries=3, **common)
    assert op.conflict_retries == 3 and op.write_windows == WriteWindows()
