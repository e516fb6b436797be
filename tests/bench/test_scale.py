"""The arithmetic of the scale bench's multi-writer points (bench/scale.py, bench/scale_workers.py):
how a lock hold is split into phases, percentiles, which figures a run declares and makes, the
table and the plot. The points themselves run in tests/bench/test_bench_smoke.py (``--quick``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from bench.scale import (Point, figure_names, multi_figures, multi_points, percentile, point_of,
                         summary_table, write_svg)
from bench.scale_partitions import figure_names as partition_figure_names
from bench.scale_workers import row, split_holds


def test_a_hold_is_split_by_the_phases_inside_it_and_the_rest_is_other():
    holds = [(10.0, 11.0), (20.0, 22.0)]
    windows = [("timeline read", 9.5, 10.25),       # starts before the hold: 0.25 inside
               ("completion", 10.5, 10.75),
               ("metadata-table write", 20.0, 21.5),
               ("conflict check", 30.0, 31.0)]      # outside every hold
    split = split_holds(holds, windows)
    assert split == pytest.approx({"timeline read": 0.25, "completion": 0.25,
                                   "metadata-table write": 1.5, "other": 1.0})
    assert sum(split.values()) == pytest.approx(3.0)  # the parts add up to the holds


@pytest.mark.parametrize("values,q,expected", [
    ([], 50, None), ([3.0], 99, 3.0), ([1, 2, 3, 4], 50, 2), ([1, 2, 3, 4], 99, 4),
    (list(range(1, 101)), 99, 99), (list(range(1, 101)), 50, 50),
])
def test_percentile_is_nearest_rank(values, q, expected):
    assert percentile(values, q) == expected


def test_overlapping_writers_are_a_quarter_and_share_key_zero():
    assert Point("ours", 32, 50, 1, overlap=True).overlapping == 8
    assert Point("ours", 8, 20, 2, overlap=True).overlapping == 2
    assert Point("ours", 8, 20, 2).overlapping == 0
    assert row(3, 1, "shared", True).column("id").to_pylist() == [0, 1_030_001]
    assert row(3, 1, "p3", False).column("id").to_pylist() == [1_030_001]


def test_the_full_matrix_has_every_writer_count_at_both_delays_for_both_engines():
    pts = multi_points(quick=False)
    for engine in ("ours", "delta"):
        got = {(p.writers, p.delay_ms) for p in pts if p.engine == engine and p.variant in ("storage", "delta")}
        assert got == {(n, d) for n in (1, 8, 16, 32) for d in (20, 50)}
    assert {p.variant for p in pts} == {"storage", "delta", "zk", "storage.overlap"}
    assert len({p.label for p in pts}) == len(pts)


def _result(pt: Point, cps: float, p99: float) -> dict:
    res = {"label": pt.label, "engine": pt.engine, "variant": pt.variant, "writers": pt.writers,
           "delay_ms": pt.delay_ms, "commits": pt.writers * pt.commits, "failed_commits": 0,
           "seconds": pt.writers * pt.commits / cps, "commits_per_s": cps, "p50_s": p99 / 2,
           "p99_s": p99, "conflicts": 0, "requests_per_commit": 30.0, "peak_rss_mb_max": 190.0,
           "store_load_requests_per_s": 40.0, "store_probe_ms_p99": 9.0, "read_back_exact": True}
    if pt.engine == "ours":
        res.update({"lock_timeouts": 0, "requests_under_lock_p50": 12, "lock_hold_s_mean": 1.0,
                    "lock_hold_split_s_mean": {"metadata-table write": 0.5, "timeline read": 0.1,
                                               "metadata-table services (compaction, clean, archival)": 0.2,
                                               "other": 0.2},
                    "admission_wait_s_p50": 0.2, "admission_wait_s_max": 0.3})
    return res


def test_a_run_makes_exactly_the_figures_it_declares_and_the_table_and_plot_show_every_point(tmp_path):
    multi = {}
    for pt in multi_points(quick=False):
        multi[pt.label] = _result(pt, 0.5 if pt.engine == "ours" else 2.0, 4.0 if pt.engine == "ours" else 1.0)
    figs = multi_figures(multi)
    names = [f.name for f in figs]
    single = {"scale.1w.commit.vs_deltalake", "scale.1w.requests.vs_deltalake", "scale.1w.round_trips.vs_deltalake",
              "scale.1w.requests_under_lock.vs_target", "scale.store.capacity_used", "scale.proxy.overhead"}
    assert set(names) == set(figure_names(quick=False)) - single - set(partition_figure_names(quick=False))
    by = {f.name: f for f in figs}
    # commits/s 0.5 against 2.0: the table's time per commit is 4x delta-rs's, a miss of 1.0x
    assert by["scale.32w.50ms.ms_per_commit.vs_deltalake"].ratio == pytest.approx(4.0)
    assert by["scale.32w.50ms.ms_per_commit.vs_deltalake"].verdict == "MISS"
    assert by["scale.8w.20ms.p99.vs_deltalake"].ratio == pytest.approx(4.0)
    assert by["scale.8w.20ms.requests_under_lock.vs_target"].ratio == pytest.approx(2.0)
    table = summary_table(multi, 160.0)
    for label in multi:
        w, d, _ = label.split(".", 2)
        assert f"| {w[:-1]} | {d[:-2]} |" in table
    assert "0.25x, 4.0x" in table  # ours / delta-rs: commits per second, p99
    path = tmp_path / "scale.svg"
    write_svg(multi, str(path))
    svg = ET.parse(path).getroot()
    lines = svg.findall("{http://www.w3.org/2000/svg}polyline")
    assert len(lines) == 6  # commits/s: ours and delta-rs at 20 and 50 ms; lock hold: ours at both
    assert all(len(pl.get("points").split()) == 4 for pl in lines)  # 1, 8, 16, 32 writers


def test_a_skipped_point_makes_no_figure_and_is_named_in_the_table():
    pt = Point("ours", 32, 50, 1, lock="zookeeper")
    multi = {pt.label: {"label": pt.label, "skipped": "time budget of 600 s spent"}}
    assert multi_figures(multi) == []
    assert "skipped: time budget" in summary_table(multi)


def test_a_label_names_its_point_back():
    for pt in multi_points(quick=False):
        assert point_of(pt.label) == pt
    with pytest.raises(SystemExit, match="unknown variant"):
        point_of("8w.20ms.dynamo")
