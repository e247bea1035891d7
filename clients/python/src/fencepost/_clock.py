"""The term's clock rule, as a pure function (clients/go has the same one)."""

from __future__ import annotations


def remaining(valid_for: float, mono: float, wall: float) -> float:
    """remaining is the time left (seconds) of a term valid for ``valid_for`` after the monotonic
    and the wall clock advanced by ``mono`` and ``wall``: the larger advance counts. A VM pause
    stops the monotonic clock (Linux CLOCK_MONOTONIC, Python's time.monotonic) while the wall clock
    is set right after the resume; a wall clock stepped back (a negative ``wall``) changes nothing;
    one stepped forward ends the term early, which is safe."""
    return valid_for - max(mono, wall)
