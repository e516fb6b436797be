"""The figures of the partition-count part of the scale bench (bench/scale_partitions.py): the
flat-latency ratio is the larger table's commit against the smaller's, the compaction's hold is
the commit that compacted, and the names are the ones declared. The measuring itself runs in
tests/bench/test_bench_smoke.py (``--quick``, 10 and 100 partitions)."""

from __future__ import annotations

from bench.scale_partitions import figure_names, figures_of


def _point(n: int, p50: float, hold: float, compaction: list[float]) -> dict:
    return {"partitions": n, "seconds_p50": p50, "lock_hold_s_p50": hold, "compaction_hold_s": compaction,
            "listing": {"mdt_s": 0.25, "walk_s": 2.0 if n > 100 else 0.2}}


def test_the_larger_table_is_measured_against_the_smaller_and_the_names_are_declared():
    figs = figures_of({1000: _point(1000, 1.6, 0.4, [2.7]), 10_000: _point(10_000, 2.4, 0.5, [3.1, 2.9])}, 20)
    by = {f.name: f for f in figs}
    assert set(by) == set(figure_names(quick=False))
    flat = by["scale.partitions.commit.10000p.vs_1000p"]
    assert flat.ratio == 1.5 and flat.verdict == "MISS"  # 2.4 s against 1.6 s: not within 1.3x
    assert by["scale.partitions.1000p.compaction_hold"].value == 2700.0
    assert by["scale.partitions.1000p.compaction_hold"].baseline_value == 400.0
    assert by["scale.partitions.10000p.compaction_hold"].value == 3100.0  # the longest of two
    assert by["scale.partitions.10000p.listing.mdt.vs_walk"].ratio == 0.125


def test_within_the_bound_the_flat_target_is_met():
    figs = figures_of({10: _point(10, 1.6, 0.4, [2.7]), 100: _point(100, 1.9, 0.4, [2.9])}, 5)
    assert [f.verdict for f in figs if f.target is not None] == ["ok"]
    assert {f.name for f in figs} == set(figure_names(quick=True))
