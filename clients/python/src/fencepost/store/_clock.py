"""The store lock's clock: elapsed time that never runs slower than the monotonic or the wall
clock (src/runtime/clock.ts conservativeClock).

Between two readings, ``ms()`` advances by the larger of the monotonic and the wall clock's
progress, never backwards. On Linux time.monotonic() does not advance while a VM is paused, while
the wall clock is set right after the resume: measured by the monotonic clock alone, a holder would
trust its lock for the pause beyond its validity while another process, elsewhere, has already
taken it. A wall clock stepped forward ends a lock early (safe); one stepped back is ignored.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class StoreClock:
    """StoreClock reads conservative elapsed milliseconds (see the module comment); thread-safe.
    ``monotonic`` and ``wall`` (seconds) are injectable for tests."""

    def __init__(
        self, monotonic: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time
    ) -> None:
        self._monotonic, self._wall = monotonic, wall
        self._mu = threading.Lock()
        self._last_mono = monotonic()
        self._last_wall = wall()
        self._elapsed = self._last_mono * 1000.0

    def ms(self) -> float:
        """ms is the conservative time now, in milliseconds from an arbitrary origin."""
        with self._mu:
            mono, wall = self._monotonic(), self._wall()
            self._elapsed += max(mono - self._last_mono, wall - self._last_wall, 0.0) * 1000.0
            self._last_mono, self._last_wall = mono, wall
            return self._elapsed
