"""The bounded map both Arrow writers write their file groups with (``commit/file_group_work``)."""

from __future__ import annotations

import threading
import time

import pytest

from airflow_hudi_occ.core.commit.file_group_work import MAX_THREADS, map_bounded


@pytest.mark.parametrize("threads", [1, 2, MAX_THREADS])
def test_results_come_back_in_order(threads):
    def slow_for_small(x):
        time.sleep(0.001 * (10 - x))
        return x * x

    assert map_bounded(slow_for_small, list(range(10)), threads) == [x * x for x in range(10)]


def test_at_most_threads_items_run_at_once():
    running, most = 0, 0
    lock = threading.Lock()

    def item(_):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.01)
        with lock:
            running -= 1

    map_bounded(item, list(range(12)), 2)
    assert most <= 2


def test_the_first_error_is_raised_after_the_running_items_finish_and_no_new_one_starts():
    started, finished = [], []
    lock = threading.Lock()

    def item(x):
        with lock:
            started.append(x)
        if x == 0:
            raise ValueError("item 0")
        time.sleep(0.05)
        with lock:
            finished.append(x)

    with pytest.raises(ValueError, match="item 0"):
        map_bounded(item, list(range(10)), 2)
    # item 1 started with item 0 and was let finish; nothing started after the error
    assert sorted(started) == sorted(finished + [0])
    assert len(started) < 10
