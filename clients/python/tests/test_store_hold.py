"""The waiter loop (fencepost.store._hold.hold) against a scripted backend, no Redis: the order of
its first attempt and its subscription, and which release messages wake it (store.json
"timing.waiting"; src/stores/hold.ts and test/unit/stores/hold.test.ts are the reference)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from fencepost.store._clock import StoreClock
from fencepost.store._hold import hold
from fencepost.store._redis import Grant, Refusal


class Scripted:
    """Scripted is one lock: free or held by another owner; it records the calls, and lets the
    test publish a release on the waiter's subscription."""

    def __init__(self, free: bool) -> None:
        self.free = free
        self.calls: list[str] = []
        self.notify: Callable[[str], None] | None = None
        self.on_attempt: Callable[[str], None] = lambda owner: None
        self.clock = StoreClock()
        self.next = 0

    def try_acquire(self, owner: str, ttl_ms: int, floor: int) -> Grant | Refusal:
        self.calls.append("acquire")
        self.on_attempt(owner)
        if self.free:
            self.free = False
            self.next += 1
            return Grant(self.next, self.clock.ms() + ttl_ms - 12, counter_missing=False, clock_floored=False)
        return Refusal(held=True, reason="held by another owner", held_for_ms=60_000)

    def renew(self, owner: str, ttl_ms: int) -> bool:
        return True

    def release(self, owner: str) -> None:
        self.free = True

    def subscribe(self, on_release: Callable[[str], None], confirmed: threading.Event) -> Callable[[], None]:
        self.calls.append("subscribe")
        self.notify = on_release
        confirmed.set()

        def off() -> None:
            self.calls.append("unsubscribe")

        return off


def run(b: Scripted, wait: float) -> Callable[[], list[object]]:
    """run starts a waiter on ``b`` in a thread (the largest jitter: 50, 100, 200, 400, 800 ms...);
    the function returned joins it and gives what it returned or raised."""
    out: list[object] = []

    def go() -> None:
        try:
            out.append(
                hold(
                    b,
                    name="l",
                    namespace="default",
                    ttl_ms=1_000,
                    wait=wait,
                    if_held="wait",
                    floor=lambda: 0,
                    clock=b.clock,
                    random=lambda: 1 - 2**-53,
                )
            )
        except Exception as e:
            out.append(e)

    t = threading.Thread(target=go)
    t.start()

    def join() -> list[object]:
        t.join(10)
        return out

    return join


def test_a_free_lock_costs_one_attempt_and_no_subscription() -> None:
    b = Scripted(free=True)
    (lock,) = run(b, wait=5)()
    assert b.calls == ["acquire"]
    lock.release()  # type: ignore[attr-defined]


def test_the_first_refusal_subscribes_then_tries_again_at_once_and_a_release_wakes_it() -> None:
    b = Scripted(free=False)
    join = run(b, wait=5)
    until(lambda: len(b.calls) >= 3)
    # Refused: it subscribes, then tries again at once (a release before the subscription is not missed).
    assert b.calls[:3] == ["acquire", "subscribe", "acquire"]
    until(lambda: b.calls.count("acquire") == 5)  # after 50, 100, 200 ms; the next is 400 ms away
    b.free = True
    woken_at = time.monotonic()
    assert b.notify is not None
    b.notify("another-owner")
    (lock,) = join()
    assert time.monotonic() - woken_at < 0.1
    assert b.calls == ["acquire", "subscribe"] + ["acquire"] * 5 + ["unsubscribe"]
    lock.release()  # type: ignore[attr-defined]


def test_a_release_naming_the_waiters_own_attempt_does_not_wake_it() -> None:
    # Every attempt's give-back publishes the attempt's own owner id, as a failed Redlock attempt's
    # does: heard as a release, it made the waiter retry at once, again and again (without the
    # rule: over 100,000 attempts in the half second against this backend; with it: the backoff's
    # five).
    b = Scripted(free=False)

    def give_back(owner: str) -> None:
        if b.notify is not None:
            b.notify(owner)

    b.on_attempt = give_back
    started = time.monotonic()
    (err,) = run(b, wait=0.5)()
    assert isinstance(err, Exception) and "not granted within 0.5 s" in str(err)
    assert time.monotonic() - started < 1.5
    assert b.calls.count("acquire") <= 8, b.calls.count("acquire")


def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail("condition not met in time")
        time.sleep(0.002)
