"""Loading user-supplied classes by dotted path (fsspec-registry style, imported lazily).

Lock providers, conflict-resolution strategies and early-detection strategies can all be
named by ``pkg.module:Class`` or ``pkg.module.Class``. Each registry wraps the reason returned
here into its own typed error, so the user sees which key was wrong and the valid names.
"""

from __future__ import annotations

import difflib
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


class Registry:
    """The names one plug-in point accepts: built-in short names, Hudi's Java class names and
    other aliases, each mapped to a class or to a ``"module:Class"`` path imported only when
    chosen (so kazoo is imported only by a writer that locks with ZooKeeper); any other value
    is tried as a dotted path to a user's subclass of ``base``.

    ``error(value, why)`` builds the plug-in point's own typed error, so a user sees which key
    was wrong and the valid names. ``reserved_prefix`` names a namespace (Hudi's Java classes)
    whose unknown members are refused with ``reserved_reason`` instead of being imported.
    """

    def __init__(self, base: type, error, *, normalize=str.lower, reserved_prefix: str | None = None,
                 reserved_reason: str = "not a known name", empty_reason: str | None = None):
        self.base = base
        self._error = error
        self._normalize = normalize
        self._reserved_prefix = reserved_prefix
        self._reserved_reason = reserved_reason
        self._empty_reason = empty_reason
        self._targets: dict[str, type | str] = {}
        self._spelling: dict[str, str] = {}  # normalised name -> as registered, for hints

    def add(self, target: type | str, *names: str | None) -> None:
        """Register ``target`` under each of ``names`` (None and '' are skipped)."""
        for name in names:
            if name:
                self._targets[self._normalize(name)] = target
                self._spelling.setdefault(self._normalize(name), name)

    def lookup(self, value: str) -> type | str | None:
        """The registered target of ``value``, without importing it; None if unregistered."""
        return self._targets.get(self._normalize((value or "").strip()))

    def resolve(self, value: str) -> type:
        """The class ``value`` names, imported if it is given as a path."""
        raw = (value or "").strip()
        if not raw and self._empty_reason is not None:
            raise self._error(value, self._empty_reason)
        target = self._targets.get(self._normalize(raw)) if raw else None
        if target is None:
            if self._reserved_prefix and raw.startswith(self._reserved_prefix):
                raise self._error(value, self._with_hint(raw, self._reserved_reason))
            target = raw
        if isinstance(target, str) and target == raw and ":" not in raw and "." not in raw:
            raise self._error(value, self._with_hint(raw, "not a known name and not a dotted Python path"))
        return self.load(target, value)

    def check(self, value: str) -> None:
        """Raise the plug-in point's error if ``value`` names nothing, without importing a
        registered target (a DAG file checks its lock provider without importing kazoo); a
        user's dotted path is imported, since only that proves it exists."""
        raw = (value or "").strip()
        if raw and self._targets.get(self._normalize(raw)) is not None:
            return
        self.resolve(value)

    def closest(self, value: str) -> str | None:
        """The registered name ``value`` most likely misspells, or None."""
        short = sorted(n for n in self._targets if "." not in n)  # short names read best
        for names in (short, sorted(self._targets)):
            found = difflib.get_close_matches(self._normalize(value), names, n=1, cutoff=0.75)
            if found:
                return self._spelling.get(found[0], found[0])
        return None

    def _with_hint(self, raw: str, why: str) -> str:
        hint = self.closest(raw)
        return f"{why}; did you mean {hint!r}?" if hint else why

    def load(self, target: type | str, value: str) -> type:
        """The class of ``target`` (a class, or a path imported now); a failure is reported as
        the plug-in point's error about ``value``, the name the user or caller gave."""
        if isinstance(target, type):
            return target
        found = import_class(target, self.base)
        if isinstance(found, str):
            raise self._error(value, found)
        return found
