"""Loading user-supplied classes by dotted path (fsspec-registry style, imported lazily).

Lock providers, conflict-resolution strategies and early-detection strategies can all be
named by ``pkg.module:Class`` or ``pkg.module.Class``. Each registry wraps the reason returned
here into its own typed error, so the user sees which key was wrong and the valid names.
"""

from __future__ import annotations

import importlib


def import_class(value: str, base: type) -> type | str:
    """The class ``value`` names if it is a subclass of ``base``; otherwise a reason (str)."""
    if ":" in value:
        module_name, _, attr = value.partition(":")
    elif "." in value and not value.startswith("org.apache."):
        module_name, _, attr = value.rpartition(".")
    else:
        return "not a known name and not a dotted Python path"
    if not module_name or not attr:
        return "not a known name and not a dotted Python path"
    try:
        obj = importlib.import_module(module_name)
    except ImportError as e:
        return f"cannot import module {module_name!r} ({e})"
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            return f"module {module_name!r} has no {attr!r}"
    if not (isinstance(obj, type) and issubclass(obj, base)):
        return f"not a {base.__name__} subclass"
    return obj
