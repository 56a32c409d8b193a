"""Which requests may go on to the engine before their admission is back
(console.gateway.ratelimit.comfortable), from what the process last heard of the
key's window."""

from __future__ import annotations

from console.gateway import ratelimit


class TestComfortable:
    def setup_method(self) -> None:
        ratelimit._seen.clear()
        ratelimit._early.clear()

    def test_nothing_heard_of_this_window_waits(self) -> None:
        assert not ratelimit.comfortable("k", rpm=1000, tpm=10**9)
        start, _ = ratelimit._window()
        ratelimit.admission_of([b"1", 5, b"0"], "k", start - 60)  # the last window
        assert not ratelimit.comfortable("k", rpm=1000, tpm=10**9)

    def test_well_under_both_limits_goes_early(self) -> None:
        start, _ = ratelimit._window()
        ratelimit.admission_of([b"1", 8, b"100"], "k", start)
        assert ratelimit.comfortable("k", rpm=10, tpm=1000)  # 9 of 10, 100 of 1000

    def test_near_a_limit_waits_counting_what_went_early(self) -> None:
        start, _ = ratelimit._window()
        ratelimit.admission_of([b"1", 9, b"0"], "k", start)
        assert not ratelimit.comfortable("k", rpm=10, tpm=1000)  # the 10th of 10
        ratelimit.admission_of([b"1", 8, b"900"], "k", start)
        assert not ratelimit.comfortable("k", rpm=10, tpm=1000)  # 900 of 1000 tokens
        ratelimit.admission_of([b"1", 8, b"0"], "k", start)
        assert ratelimit.comfortable("k", rpm=10, tpm=1000)
        ratelimit.early_start("k")  # one sent on, its admission not back yet
        assert not ratelimit.comfortable("k", rpm=10, tpm=1000)
        ratelimit.early_end("k")
        assert ratelimit.comfortable("k", rpm=10, tpm=1000)
        assert not ratelimit.comfortable("k", rpm=0, tpm=1000)
