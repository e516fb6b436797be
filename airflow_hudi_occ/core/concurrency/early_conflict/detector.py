"""Which detector a write gets: the strategy named by
``hoodie.write.concurrency.early.conflict.detection.strategy`` (short name, Hudi's class name or
a user's subclass by dotted path), or, left empty, the marker type's default."""

from __future__ import annotations

from airflow_hudi_occ.core.config import ECD_STRATEGY, MarkerType, WriteConfig
from airflow_hudi_occ.core.errors import UnknownStrategyError
from airflow_hudi_occ.core.plugins import Registry
from airflow_hudi_occ.core.concurrency.early_conflict.async_checker import (
    AsyncTimelineServerBasedDetectionStrategy, BloomAsyncTimelineServerBasedDetectionStrategy)
from airflow_hudi_occ.core.concurrency.early_conflict.strategies import (
    BloomDirectMarkerBasedDetectionStrategy, EarlyConflictDetectionStrategy,
    SimpleDirectMarkerBasedDetectionStrategy, SimpleTransactionDirectMarkerBasedDetectionStrategy)

STRATEGIES: tuple[type[EarlyConflictDetectionStrategy], ...] = (
    SimpleDirectMarkerBasedDetectionStrategy,
    SimpleTransactionDirectMarkerBasedDetectionStrategy,
    AsyncTimelineServerBasedDetectionStrategy,
    BloomDirectMarkerBasedDetectionStrategy,
    BloomAsyncTimelineServerBasedDetectionStrategy,
)


def valid_strategy_names() -> list[str]:
    return [n for cls in STRATEGIES for n in (cls.name, cls.hudi_class)] + ["<python.module>:<Class>"]


def _unknown(value: str, why: str) -> UnknownStrategyError:
    return UnknownStrategyError(
        f"unknown early conflict detection strategy {value!r}: {why}; valid: "
        f"{', '.join(valid_strategy_names())}",
        key=ECD_STRATEGY.key, value=value,
        remedy=f"set {ECD_STRATEGY.key} to one of simple, transactional, async, bloom-direct, "
               "bloom-async (or Hudi's class name), or leave it empty for the marker type's default")


_REGISTRY = Registry(EarlyConflictDetectionStrategy, _unknown, reserved_prefix="org.apache.hudi.",
                     reserved_reason="not a known strategy")
for _cls in STRATEGIES:
    _REGISTRY.add(_cls, _cls.name, _cls.hudi_class, _cls.hudi_class.rsplit(".", 1)[-1], *_cls.aliases)


def get_detection_strategy(name_or_empty: str | None,
                           write_config: WriteConfig | None = None) -> type[EarlyConflictDetectionStrategy]:
    """The strategy class for a config value; empty picks the marker type's default."""
    raw = (name_or_empty or "").strip()
    if not raw:
        marker_type = (write_config or WriteConfig()).marker_type
        return (AsyncTimelineServerBasedDetectionStrategy
                if marker_type is MarkerType.TIMELINE_SERVER_BASED
                else SimpleDirectMarkerBasedDetectionStrategy)
    return _REGISTRY.resolve(raw)


def check_detection_strategy(name_or_empty: str | None) -> None:
    """Raise :class:`UnknownStrategyError` if a non-empty ``name_or_empty`` names no strategy."""
    if (name_or_empty or "").strip():
        _REGISTRY.check(name_or_empty.strip())


def create_detector(table, instant_time: str, write_config: WriteConfig | None = None,
                    **kwargs) -> EarlyConflictDetectionStrategy:
    """The detector ``write_config`` asks for (strategy by name, else by marker type)."""
    write_config = write_config or WriteConfig()
    cls = get_detection_strategy(write_config.early_conflict.strategy, write_config)
    return cls(table, instant_time, write_config, **kwargs)
