import pytest
from hypothesis import given, strategies as st

from airflow_hudi_occ.core.format.instant import Action, Instant, State, parse_file_name
from airflow_hudi_occ.core.format.instant_time import InstantTimeGenerator, format_ms, parse_ms

times = st.integers(min_value=946684800000, max_value=4102444799999).map(format_ms)


@given(times, times, st.sampled_from(list(Action)), st.sampled_from(list(State)))
def test_file_name_round_trip_layout2(t, c, action, state):
    inst = Instant(t, action, state, c if state is State.COMPLETED else None)
    parsed = parse_file_name(inst.file_name(2))
    expected = inst if state is not State.COMPLETED else inst.to(State.COMPLETED, c)
    assert parsed == expected


def test_commit_inflight_has_no_action_and_compaction_completes_as_commit():
    assert Instant("20250101000000000", Action.COMMIT, State.INFLIGHT).file_name() == "20250101000000000.inflight"
    done = Instant("20250101000000000", Action.COMPACTION, State.INFLIGHT).to(State.COMPLETED, "20250101000000001")
    assert done.file_name() == "20250101000000000_20250101000000001.commit"
    assert Instant("20250101000000000", Action.COMMIT, State.COMPLETED).file_name(1) == "20250101000000000.commit"


@pytest.mark.parametrize("name", ["hoodie.properties", "history", "20250101.commit", "abc.commit",
                                   "20250101000000000.unknownaction", "20250101000000000_20250101000000001.commit.requested",
                                   ".20250101000000000.commit.tmp"])
def test_foreign_names_are_not_instants(name):
    assert parse_file_name(name) is None


@given(st.integers(min_value=946684800000, max_value=4102444799999))
def test_instant_time_codec(ms):
    s = format_ms(ms)
    assert len(s) == 17 and parse_ms(s) == ms


def test_generator_strictly_increases_even_when_clock_goes_back():
    clock_values = iter([100.0, 100.0, 99.0, 50.0, 100.5])
    slept = []
    gen = InstantTimeGenerator(200, clock=lambda: next(clock_values), sleep=slept.append)
    out = [gen.new_time() for _ in range(5)]
    assert out == sorted(out) and len(set(out)) == 5
    assert slept == [0.2] * 5  # the skew wait is taken on every time handed out


def test_generator_respects_the_timeline_floor():
    gen = InstantTimeGenerator(0, clock=lambda: 1.0)
    floor = format_ms(5_000_000)
    assert gen.new_time(floor=floor) > floor
