"""Holding a store lock, the same for one Redis and for Redlock (src/stores/hold.ts): wait for the
grant (release notifications first, jittered exponential backoff as the fallback), then keep it
with a watchdog that renews every third of the TTL, and declare it lost the moment its validity
cannot be vouched for. The decisions are _timing.py's; this is the threads and the bookkeeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import random as _random
import threading
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Literal

from .._errors import FencepostError, LockLostError, LockReleasedError, NotAcquiredError
from .._token import check_token
from ._clock import StoreClock
from ._owner import new_owner_id
from ._redis import Backend, Grant, Refusal
from ._timing import after_renew, renew_every_ms, retry_delay_ms

IfHeld = Literal["wait", "fail"]

SUBSCRIBE_WAIT = 0.25
"""SUBSCRIBE_WAIT: how long (seconds) a waiter waits, after its first refusal, for the store to
confirm its release subscription before it tries again; a store slow to answer must not hold the
attempt up (the backoff finds a release it missed)."""

OWN_OWNERS = 8
"""OWN_OWNERS: how many of a waiter's latest owner ids it recognises in release messages (older
attempts' give-backs have long arrived)."""


class StoreLockHeldError(NotAcquiredError):
    """StoreLockHeldError: ``if_held="fail"``, and another owner held the store lock. It names no
    holder: a store's owner id is a random secret per grant (whoever knows it could release the
    lock), not an identity to report."""


def void(_: object) -> None:
    """void drops a value (a callback's result nobody reads)."""


class Waiter:
    """Waiter is one acquire's wait, which another thread may cancel (acquire_async does)."""

    def __init__(self) -> None:
        self.cancelled = False
        self.wake = threading.Event()

    def cancel(self) -> None:
        """cancel ends the wait: the acquire raises NotAcquiredError at its next step."""
        self.cancelled = True
        self.wake.set()


class StoreLock:
    """StoreLock is a store lock held by this process, from fencepost.store.acquire() (or a Store's
    acquire()). Use it as a context manager — ``with`` or ``async with`` — which releases it on
    exit. Its methods are safe to call from any thread.

    Two daemon threads keep it: the watchdog renews every third of the TTL (a renew without an
    answer is retried every 100 ms until the validity passes; a renew that finds the key gone or
    another owner's ends the lock at once), and a second one ends it at the end of its validity
    whatever is still in flight — a process paused past it finds the lock lost when it resumes.
    """

    def __init__(
        self,
        *,
        name: str,
        namespace: str,
        backend: Backend,
        owner: str,
        grant: Grant,
        ttl_ms: int,
        clock: StoreClock,
        on_end: Callable[[StoreLock], None] | None = None,
    ) -> None:
        self._name, self._namespace = name, namespace
        self._backend, self._owner = backend, owner
        self._token, self._counter_missing, self._clock_floored = (
            grant.token,
            grant.counter_missing,
            grant.clock_floored,
        )
        self._ttl_ms, self._clock = ttl_ms, clock
        self._mu = threading.Lock()
        self._valid_until = grant.valid_until_ms
        self._error: FencepostError | None = None
        self._ended = threading.Event()
        self._callbacks: list[Callable[[], None]] = []
        self._on_end = on_end
        self._release_mu = threading.Lock()
        self._released = False
        self._release_error: FencepostError | None = None
        for target in (self._renewer, self._lapse):
            threading.Thread(
                target=target, name=f"fencepost-store-{name}-{target.__name__}", daemon=True
            ).start()

    # --- what the application reads -------------------------------------------------------------

    @property
    def name(self) -> str:
        """name is the lock's name."""
        return self._name

    @property
    def namespace(self) -> str:
        """namespace is the lock's namespace (its keys' prefix)."""
        return self._namespace

    @property
    def token(self) -> int:
        """token is this grant's fencing token, an exact int: pass it with every write to a
        guarded resource."""
        return self._token

    @property
    def counter_missing(self) -> bool:
        """counter_missing: the fencing counter did not exist before this grant (on Redlock: on
        none of the majority) — a new lock's first grant, or the store lost its data
        (docs/stores.md, "Tokens when Redis loses its data"). The token then starts from the Redis
        server's clock (clock_floored)."""
        return self._counter_missing

    @property
    def clock_floored(self) -> bool:
        """clock_floored: this grant's token was floored at the Redis server's clock in
        microseconds (about 1.8e15 today), because the Redis process issuing it is not the one that
        issued the lock's last token — a new or lost counter, a failover, a restart, a moved slot
        (fence-next.lua fence_epoch; on Redlock, on any master of the majority). The token is still
        above every earlier one as long as that server's clock is not behind the previous issuer's
        by more than the time since (docs/stores.md). Without counter_missing: the lock's tokens now
        come from another Redis process."""
        return self._clock_floored

    @property
    def ttl(self) -> float:
        """ttl is the lock's TTL in seconds."""
        return self._ttl_ms / 1000

    @property
    def error(self) -> FencepostError | None:
        """error is None while the lock is held, then why it ended: a LockLostError, or a
        LockReleasedError after release()."""
        with self._mu:
            return self._error

    @property
    def ended(self) -> threading.Event:
        """ended is set the moment the lock ends (lost or released): pass it to the work done under
        the lock, or wait on it. Do not set it yourself."""
        return self._ended

    def held(self) -> bool:
        """held reports whether the lock is still valid now: not lost or released, and its validity
        (counted from when the last grant or renew was sent, TTL less the drift) not passed on the
        monotonic clock — or the wall clock, if it ran further (a VM pause stops the former). It is
        a belief: a process paused right after held() returned True still writes with this token;
        the guard at the resource refuses that write."""
        with self._mu:
            ended, left = self._error is not None, self._valid_until - self._clock.ms()
        if ended:
            return False
        if left <= 0:
            self._end(LockLostError(f"lock {self._name} lost: its validity passed"))
            return False
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """wait blocks until the lock ends or ``timeout`` seconds passed; True when it ended."""
        return self._ended.wait(timeout)

    async def wait_async(self) -> None:
        """wait_async returns when the lock has ended (lost or released)."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def settle() -> None:
            if not done.done():
                done.set_result(None)

        with self._mu:
            if self._error is not None:
                return
            self._callbacks.append(lambda: void(loop.call_soon_threadsafe(settle)))
        await done

    # --- what the application does ----------------------------------------------------------------

    def release(self) -> None:
        """release stops believing in the lock first, then gives it up: compare-and-delete of the
        holder key and a publish that wakes the waiters, in one script (also after a loss: if the
        key is still this owner's after all, waiters need not wait out its TTL). Idempotent: later
        calls do nothing more and raise what the first one raised (a store that could not be told
        lets the key expire)."""
        with self._release_mu:
            if not self._released:
                self._released = True
                self._end(LockReleasedError(f"lock {self._name} released"))
                try:
                    self._backend.release(self._owner)
                except FencepostError as e:
                    self._release_error = e
                finally:
                    if self._on_end is not None:
                        self._on_end(self)
            err = self._release_error
        if err is not None:
            raise err

    async def release_async(self) -> None:
        """release_async is release() for asyncio (it runs in a worker thread)."""
        await asyncio.to_thread(self.release)

    def __enter__(self) -> StoreLock:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    async def __aenter__(self) -> StoreLock:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.release_async()

    def __repr__(self) -> str:
        return (
            f"<fencepost.store.StoreLock {self._namespace}/{self._name} token={self._token} "
            f"ended={self._ended.is_set()}>"
        )

    # --- the machinery ----------------------------------------------------------------------------

    def _end(self, err: FencepostError) -> None:
        """_end ends the lock with err (only the first end counts)."""
        with self._mu:
            if self._error is not None:
                return
            self._error = err
            callbacks, self._callbacks = self._callbacks, []
        self._ended.set()
        for cb in callbacks:
            with contextlib.suppress(Exception):
                cb()

    def _renewer(self) -> None:
        """_renewer renews every third of the TTL; a failure is retried every 100 ms until the
        validity passes (after_renew decides)."""
        next_in: float = renew_every_ms(self._ttl_ms)
        while not self._ended.wait(next_in / 1000):
            sent = self._clock.ms()
            with self._mu:
                until = self._valid_until
            if sent >= until:
                self._end(
                    LockLostError(f"lock {self._name} lost: the validity passed before the renew was sent")
                )
                return
            error = ""
            try:
                outcome: Literal["renewed", "not-owner", "failed"] = (
                    "renewed" if self._backend.renew(self._owner, self._ttl_ms) else "not-owner"
                )
            except Exception as e:  # a closed store's pool, too: the validity decides
                outcome, error = "failed", str(e)
            with self._mu:
                if self._error is not None:
                    return
                d = after_renew(outcome, sent, self._clock.ms(), self._valid_until, self._ttl_ms, error=error)
                if d.kind == "renewed":
                    self._valid_until = d.valid_until_ms
            if d.kind == "lost":
                self._end(LockLostError(f"lock {self._name} lost: {d.reason}"))
                return
            next_in = d.in_ms

    def _lapse(self) -> None:
        """_lapse ends the lock at the end of its validity, re-reading the clock at least every
        250 ms so that a validity passed during a pause (or a wall-clock jump) is noticed at once."""
        while True:
            with self._mu:
                left = self._valid_until - self._clock.ms()
            if left <= 0:
                self._end(LockLostError(f"lock {self._name} lost: the validity passed without a renew"))
                return
            if self._ended.wait(min(left / 1000, 0.25)):
                return


def hold(
    backend: Backend,
    *,
    name: str,
    namespace: str,
    ttl_ms: int,
    wait: float | None,
    if_held: IfHeld,
    floor: Callable[[], int],
    clock: StoreClock,
    waiter: Waiter | None = None,
    on_end: Callable[[StoreLock], None] | None = None,
    random: Callable[[], float] = _random.random,
    new_owner: Callable[[], str] = new_owner_id,
) -> StoreLock:
    """hold waits for the lock and returns it held, or raises NotAcquiredError (not granted within
    ``wait`` seconds — None: for as long as it takes, 0: one attempt — or cancelled) or
    StoreLockHeldError (``if_held="fail"`` and another owner holds it).

    As store.json "timing.waiting" says: the first attempt goes out at once (a free lock costs one
    round trip, and no SUBSCRIBE); after the first refusal the waiter subscribes to the lock's
    release channel (waiting up to SUBSCRIBE_WAIT for the confirmation) and tries again at once, so
    that a release between the refusal and the subscription is not missed. Then it retries at once
    when a release is published by another owner than its own recent attempts (a failed Redlock
    attempt gives back what it took, and that release publishes too; on Redlock the backend tells
    of a release only once a majority of the masters published it); otherwise it sleeps a
    full-jitter backoff. Failures to reach the store are retried the same way until the wait ends;
    the last reason is reported.
    """
    w = waiter if waiter is not None else Waiter()
    deadline = None if wait is None else clock.ms() + wait * 1000
    notified = threading.Event()
    # This waiter's own latest owner ids: an attempt that failed gives back what it took, and that
    # release publishes its owner id too; heard as a release, it would make the waiter retry at
    # once, every time (before this rule and Redlock's majority rule, one waiter on a lock held on
    # 3 of 5 masters made 325-527 attempts in a second). Appended here, read by the subscriber's
    # thread.
    mine: deque[str] = deque(maxlen=OWN_OWNERS)
    mine_mu = threading.Lock()

    def on_release(owner: str) -> None:
        with mine_mu:
            if owner in mine:
                return
        notified.set()
        w.wake.set()

    subscribed = False
    unsubscribe: Callable[[], None] | None = None
    try:
        last_reason = "not tried"
        waits = 0
        while True:
            if w.cancelled:
                raise NotAcquiredError(f"lock {name} not granted: the wait was cancelled ({last_reason})")
            owner = new_owner()
            with mine_mu:
                mine.append(owner)
            f = check_token(floor(), "floor")
            a: Grant | Refusal
            try:
                a = backend.try_acquire(owner, ttl_ms, f)
            except FencepostError as e:
                a = Refusal(held=False, reason=str(e))
            # A grant answered after its own validity (a slow reply, a pause) is worth nothing.
            if isinstance(a, Grant) and clock.ms() >= a.valid_until_ms:
                with contextlib.suppress(FencepostError):
                    backend.release(owner)
                a = Refusal(held=False, reason=f"granted token {a.token} too late: its validity had passed")
            if isinstance(a, Grant):
                return StoreLock(
                    name=name,
                    namespace=namespace,
                    backend=backend,
                    owner=owner,
                    grant=a,
                    ttl_ms=ttl_ms,
                    clock=clock,
                    on_end=on_end,
                )
            last_reason = a.reason
            if a.held and if_held == "fail":
                raise StoreLockHeldError(f"lock {name} is held by another owner ({a.reason})")
            left = None if deadline is None else deadline - clock.ms()
            if left is not None and left <= 0:
                raise NotAcquiredError(f"lock {name} not granted within {wait:g} s ({last_reason})")
            if not subscribed:
                # Listening before waiting, then trying again at once: the release may have come
                # between the refusal and the subscription.
                subscribed = True
                confirmed = threading.Event()
                with contextlib.suppress(FencepostError):
                    unsubscribe = backend.subscribe(on_release, confirmed)
                    confirmed.wait(SUBSCRIBE_WAIT if left is None else min(SUBSCRIBE_WAIT, left / 1000))
                continue
            if notified.is_set():  # a release while the attempt was out: try again at once
                notified.clear()
                continue
            delay = retry_delay_ms(waits, random, a.held_for_ms, left)
            waits += 1
            w.wake.wait(delay / 1000)
            w.wake.clear()
            notified.clear()
    finally:
        if unsubscribe is not None:
            unsubscribe()
