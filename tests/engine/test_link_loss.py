"""HCCS loss as a rate over traffic, with a state when it cannot be measured."""

from __future__ import annotations

import pytest

from engine.link_loss import (
    MEASURED,
    NO_BASELINE,
    NO_TRAFFIC,
    RESET,
    UNSUPPORTED,
    chip_loss_reading,
    node_loss_reading,
)

IDLE = [[100, 100, 0, 0]] * 7


def test_idle_links_read_no_traffic_not_zero() -> None:
    reading = chip_loss_reading(IDLE, IDLE)
    assert reading.state == NO_TRAFFIC and reading.pct is None


def test_loss_is_bad_packets_over_sent_packets() -> None:
    after = [[1100, 1100, 150, 50]] + IDLE[1:]
    reading = chip_loss_reading(IDLE, after)
    assert reading.state == MEASURED and reading.pct == pytest.approx(20.0)


def test_errors_on_a_link_that_sends_nothing_are_a_dead_link() -> None:
    after = [[100, 100, 3, 0]] + IDLE[1:]
    assert chip_loss_reading(IDLE, after).pct == 100.0


def test_first_sample_and_counter_reset_have_no_window() -> None:
    assert chip_loss_reading(None, IDLE).state == NO_BASELINE
    assert chip_loss_reading(IDLE, [[5, 5, 0, 0]] * 7).state == RESET


def test_a_node_is_measured_if_any_chip_is_and_unsupported_when_collect_says_so() -> (
    None
):
    prev = {"0.0": {"links": IDLE}, "1.0": {"links": IDLE}}
    cur = {"0.0": {"links": IDLE}, "1.0": {"links": [[2100, 2100, 20, 0]] + IDLE[1:]}}
    reading = node_loss_reading(prev, cur)
    assert reading.state == MEASURED and reading.pct == pytest.approx(1.0)
    assert node_loss_reading(prev, prev).state == NO_TRAFFIC
    assert node_loss_reading(prev, {}, hccs_unsupported=True).state == UNSUPPORTED
    assert node_loss_reading(None, {}).state == UNSUPPORTED
