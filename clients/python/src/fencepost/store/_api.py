"""Store, connect(), acquire() and acquire_async(): the public face of the Redis lock stores."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Literal

from .._errors import FencepostError, LockLostError
from .._protocol import DEFAULT_NAMESPACE, DEFAULT_TTL_MS
from ._clock import StoreClock
from ._hold import IfHeld, StoreLock, Waiter, hold
from ._keys import check_name, lock_keys
from ._owner import Pod, new_owner_id, pod_from_env
from ._redis import (
    COMMAND_TIMEOUT,
    MASTER_TIMEOUT,
    Backend,
    Master,
    RedisBackend,
    RedlockBackend,
    ReleaseChannels,
    connect_target,
)
from ._timing import check_ttl_ms
from ._url import StoreSpec, parse_store_url

Floor = int | Callable[[str], int]
"""Floor is the lowest token a grant may be issued above: an int, or a function of the lock's
name (say, reading the guarded resource's own mark). Default 0 (docs/stores.md)."""


class Store:
    """Store is an open lock store — one Redis (``redis://``, ``rediss://``) or N Redlock masters
    (``redlock://``) — whose connections its locks share. Open it once per process with
    connect() and pass it to acquire() (or call its own acquire()); close() it when done: locks
    still held then are ended (lost) and their keys released. A context manager closing on exit.

    redis-py connects on first use: a store that is down is found by the first attempt (and the
    attempts retry until the wait ends), not by connect().
    """

    def __init__(self, spec: StoreSpec, *, clock: StoreClock | None = None) -> None:
        self._spec = spec
        self._clock = clock if clock is not None else StoreClock()
        self._mu = threading.Lock()
        self._held: set[StoreLock] = set()
        self._closed = False
        self._pool: ThreadPoolExecutor | None = None
        self._masters: list[Master] = []
        timeout = COMMAND_TIMEOUT if spec.kind == "redis" else MASTER_TIMEOUT
        for t in spec.targets:
            client = connect_target(t, timeout)
            name = f"{t.endpoint.host}:{t.endpoint.port}"
            self._masters.append(Master(name, client, ReleaseChannels(client, name)))
        if spec.kind == "redlock":
            # Four calls in flight per master: a master that stopped answering holds a thread for
            # at most its socket timeout (500 ms) while the others go on.
            self._pool = ThreadPoolExecutor(
                max_workers=4 * len(self._masters), thread_name_prefix="fencepost-redlock"
            )

    @property
    def kind(self) -> Literal["redis", "redlock"]:
        """kind is ``redis`` (one Redis) or ``redlock`` (N masters)."""
        return self._spec.kind

    @property
    def display(self) -> str:
        """display is the store's URL with the password redacted."""
        return self._spec.display

    def backend(self, namespace: str, name: str) -> Backend:
        """backend is lock ``name`` of ``namespace`` in this store (names checked: ValueError)."""
        keys = lock_keys(namespace, name)
        if self._pool is not None:
            return RedlockBackend(self._masters, self._pool, keys, self._clock)
        m = self._masters[0]
        return RedisBackend(m.client, m.channels, keys, self.display, self._clock)

    def acquire(
        self,
        lock: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        ttl: float = DEFAULT_TTL_MS / 1000,
        wait: float | None = None,
        if_held: IfHeld | None = None,
        floor: Floor | None = None,
        pod: Pod | None = None,
    ) -> StoreLock:
        """acquire: see fencepost.store.acquire()."""
        return self._acquire(_options(lock, namespace, ttl, wait, if_held, floor, pod), None, None)

    def acquire_async(
        self,
        lock: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        ttl: float = DEFAULT_TTL_MS / 1000,
        wait: float | None = None,
        if_held: IfHeld | None = None,
        floor: Floor | None = None,
        pod: Pod | None = None,
    ) -> AcquireStoreAsync:
        """acquire_async: see fencepost.store.acquire_async()."""
        o = _options(lock, namespace, ttl, wait, if_held, floor, pod)  # refused before any thread starts
        return AcquireStoreAsync(lambda w: self._acquire(o, w, None))

    def _acquire(self, o: _Options, waiter: Waiter | None, then_close: Store | None) -> StoreLock:
        with self._mu:
            if self._closed:
                raise FencepostError(f"fencepost: store {self.display} is closed")
        backend = self.backend(o.namespace, o.lock)

        def on_end(held: StoreLock) -> None:
            with self._mu:
                self._held.discard(held)
            if then_close is not None:
                then_close.close()

        def floor_of() -> int:
            if o.floor is None:
                return 0
            return o.floor(o.lock) if callable(o.floor) else o.floor

        held = hold(
            backend,
            name=o.lock,
            namespace=o.namespace,
            ttl_ms=o.ttl_ms,
            wait=o.wait,
            if_held=o.if_held,
            floor=floor_of,
            clock=self._clock,
            waiter=waiter,
            on_end=on_end,
            new_owner=lambda: new_owner_id(o.pod),
        )
        with self._mu:
            closed = self._closed
            if not closed:
                self._held.add(held)
        if closed:
            held.release()
            raise FencepostError(f"fencepost: store {self.display} was closed while acquiring {o.lock}")
        return held

    def close(self) -> None:
        """close ends the locks still held (lost: their error says the store was closed), releases
        their keys, and closes the connections. Idempotent."""
        with self._mu:
            if self._closed:
                return
            self._closed = True
            held, self._held = list(self._held), set()
        for lk in held:
            lk._end(LockLostError(f"lock {lk.name} lost: the store {self.display} was closed"))
            with contextlib.suppress(FencepostError):
                lk.release()
        for m in self._masters:
            m.channels.close()
            with contextlib.suppress(Exception):
                m.client.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<fencepost.store.Store {self.display}>"


@dataclass(frozen=True, slots=True)
class _Options:
    lock: str
    namespace: str
    ttl_ms: int
    wait: float | None
    if_held: IfHeld
    floor: Floor | None
    pod: Pod | None


def _options(  # noqa: PLR0917 - the acquire functions' keyword arguments, in order
    lock: str,
    namespace: str,
    ttl: float,
    wait: float | None,
    if_held: IfHeld | None,
    floor: Floor | None,
    pod: Pod | None,
) -> _Options:
    """_options checks an acquire's arguments (ValueError naming the argument and the value)."""
    check_name(lock, "lock name")
    check_name(namespace, "namespace")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise ValueError(f"fencepost: ttl must be a number of seconds, got {ttl!r}")
    ttl_ms = check_ttl_ms(round(ttl * 1000), "ttl (in ms)")
    if wait is not None and not wait >= 0:
        raise ValueError(f"fencepost: wait must not be negative, got {wait}")
    if if_held not in (None, "wait", "fail"):
        raise ValueError(f"fencepost: if_held must be 'wait' or 'fail', got {if_held!r}")
    return _Options(
        lock, namespace, ttl_ms, wait, if_held or "wait", floor, pod if pod is not None else pod_from_env()
    )


def connect(url: str) -> Store:
    """connect opens the store of ``url`` for many acquires (one set of connections per process,
    not one per lock): ``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` (TLS) or
    ``redlock://[[user]:password@]h1:p1,h2:p2,h3:p3,...[/db]`` (N >= 3 independent masters, 5
    usual). A URL it refuses raises StoreUrlError (a ValueError) naming the URL, password hidden."""
    return Store(parse_store_url(url, "store"))


def acquire(
    lock: str,
    store: str | Store,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    ttl: float = DEFAULT_TTL_MS / 1000,
    wait: float | None = None,
    if_held: IfHeld | None = None,
    floor: Floor | None = None,
    pod: Pod | None = None,
) -> StoreLock:
    """acquire takes lock ``lock`` of ``namespace`` (both DNS labels) in ``store`` — a URL (see
    connect(); its connections are opened for this lock and closed at its release) or an open
    Store — and waits until it is granted or ``wait`` seconds passed (None, the default: as long as
    it takes; 0: one attempt).

    ``ttl``: seconds the holder key lives without a renew (whole milliseconds, 0.3 s to 1 day,
    default 15 s); the lock is renewed every third of it and trusted for ``ttl`` less 1 % + 2 ms
    from each request's sending. ``if_held="fail"``: raise StoreLockHeldError at once when another
    owner holds it. ``floor``: the lowest token the grant may be issued above (see Floor).
    ``pod``: the Kubernetes pod this holder runs in, named in its owner ids so that the controller
    can show the holder (default: $POD_NAME and $POD_UID when both are set; outside Kubernetes,
    none).

    Returns a held StoreLock (release it, or use it as a context manager), or raises
    NotAcquiredError (not granted in time; the message has the last reason — held, or the store
    unreachable), StoreLockHeldError, StoreUrlError or ValueError (a bad argument, before anything
    is sent).
    """
    o = _options(lock, namespace, ttl, wait, if_held, floor, pod)
    if isinstance(store, Store):
        return store._acquire(o, None, None)
    own = connect(store)
    try:
        return own._acquire(o, None, own)
    except BaseException:
        own.close()
        raise


def acquire_async(
    lock: str,
    store: str | Store,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    ttl: float = DEFAULT_TTL_MS / 1000,
    wait: float | None = None,
    if_held: IfHeld | None = None,
    floor: Floor | None = None,
    pod: Pod | None = None,
) -> AcquireStoreAsync:
    """acquire_async is acquire() for asyncio: ``async with fencepost.store.acquire_async(...) as
    lock:`` (released on exit), or ``lock = await fencepost.store.acquire_async(...)``. The wait
    runs in the event loop's default executor; a cancelled wait stops at its next step, and a
    grant that raced the cancellation is released."""
    o = _options(lock, namespace, ttl, wait, if_held, floor, pod)
    if isinstance(store, Store):
        given = store
        return AcquireStoreAsync(lambda w: given._acquire(o, w, None))
    url = store
    parse_store_url(url, "store")

    def run(w: Waiter) -> StoreLock:
        own = connect(url)
        try:
            return own._acquire(o, w, own)
        except BaseException:
            own.close()
            raise

    return AcquireStoreAsync(run)


class AcquireStoreAsync:
    """AcquireStoreAsync is what acquire_async() returns: await it for a StoreLock, or use it with
    ``async with`` (the lock is released on exit)."""

    def __init__(self, run: Callable[[Waiter], StoreLock]) -> None:
        self._run_in_thread = run
        self._lock: StoreLock | None = None

    def __await__(self) -> Generator[object, None, StoreLock]:
        return self._run().__await__()

    async def _run(self) -> StoreLock:
        waiter = Waiter()
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(None, self._run_in_thread, waiter)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            waiter.cancel()

            def drop(f: asyncio.Future[StoreLock]) -> None:
                if not f.cancelled() and f.exception() is None:
                    threading.Thread(target=_release_quietly, args=(f.result(),), daemon=True).start()

            fut.add_done_callback(drop)
            raise

    async def __aenter__(self) -> StoreLock:
        self._lock = await self
        return self._lock

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._lock is not None:
            await self._lock.release_async()


def _release_quietly(lock: StoreLock) -> None:
    with contextlib.suppress(FencepostError):
        lock.release()
