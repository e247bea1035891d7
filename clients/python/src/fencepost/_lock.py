"""The lock: acquire through the agent, believe in the term only as long as the clock allows,
follow the event stream, release."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import queue
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from types import TracebackType
from typing import Literal

from ._api import Event, Snapshot
from ._clock import remaining
from ._errors import (
    AgentRequestError,
    AlreadyDoneProblem,
    FencepostError,
    LockHeldProblem,
    LockLostError,
    LockReleasedError,
    NotAcquiredError,
    NotGrantedProblem,
)
from ._http import Agent
from ._sse import SSEMessage, parse_sse
from ._token import format_token

IfHeld = Literal["wait", "fail"]

_MAX_WAIT_PER_REQUEST = 30.0
"""One acquire request waits at most this long; a longer wait asks again (Mutex keeps the place)."""
_READ_TIMEOUT = 5.0
"""Bounds a state read and the withdrawal of an abandoned acquire."""
_STREAM_TIMEOUT = 45.0
"""The event stream is re-opened when silent this long (the agent pings every 15 s)."""

# The clocks, read at each use (tests replace them to stage a VM pause or a clock step).
_monotonic: Callable[[], float] = time.monotonic
_wall: Callable[[], float] = time.time


class Lock:
    """Lock is a term of a lock held through the agent, from acquire() or acquire_async().

    Use it as a context manager (``with acquire(...) as lock:``; ``async with``), which releases it
    on exit. Its methods are safe to call from any thread.
    """

    def __init__(self, agent: Agent, token: int, permit: int | None, run_id: str | None) -> None:
        self._agent = agent
        self._token = token
        self._permit = permit
        self._run_id = run_id
        self._mu = threading.Lock()
        self._valid_from = (0.0, 0.0)  # (monotonic, wall) when the read that gave _valid_for was sent
        self._valid_for = 0.0
        self._error: FencepostError | None = None
        self._ended = threading.Event()
        self._on_end: list[Callable[[], None]] = []
        self._kick = threading.Event()
        self._events: queue.Queue[Event] = queue.Queue(maxsize=64)
        self._events_closed = threading.Event()
        self._stream: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._release_mu = threading.Lock()
        self._released = False
        self._release_error: FencepostError | None = None

    # --- what the application reads -------------------------------------------------------------

    @property
    def name(self) -> str:
        """name is the lock's name."""
        return self._agent.lock

    @property
    def token(self) -> int:
        """token is this term's fencing token: pass it with every write to a guarded resource."""
        return self._token

    @property
    def permit(self) -> int | None:
        """permit is the Semaphore permit this term holds; None for Election and Mutex locks."""
        return self._permit

    @property
    def error(self) -> FencepostError | None:
        """error is None while the term lasts, then why it ended: a LockLostError, or a
        LockReleasedError after release()."""
        with self._mu:
            return self._error

    @property
    def ended(self) -> threading.Event:
        """ended is set the moment the term ends (lost or released): pass it to the work done under
        the lock, or wait on it. Do not set it yourself."""
        return self._ended

    def held(self) -> bool:
        """held reports whether the term is still valid now: not lost or released, and the time the
        agent last gave for it has not run out since that read was sent — on the monotonic and on
        the wall clock, whichever ran further (a VM pause stops the monotonic clock; a wall clock
        stepped back is ignored). It is a belief: a process paused right after held() returned
        True still writes with this token; the guard at the resource refuses that write."""
        with self._mu:
            ended, left = self._error is not None, self._remaining_locked()
        if ended:
            return False
        if left <= 0:
            self._end(LockLostError(f"lock {self.name}: the term's time ran out"))
            return False
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """wait blocks until the term ends or ``timeout`` seconds passed; True when it ended."""
        return self._ended.wait(timeout)

    async def wait_async(self) -> None:
        """wait_async returns when the term has ended (lost or released)."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def settle() -> None:
            if not done.done():
                done.set_result(None)

        def wake() -> None:
            loop.call_soon_threadsafe(settle)

        with self._mu:
            if self._error is None:
                self._on_end.append(wake)
            else:
                return
        await done

    def events(self) -> Iterator[Event]:
        """events yields the lock's events (renewed, lost, released, draining, ...) as the agent
        sends them, and ends after the term has ended. Up to 64 wait to be read; later ones are
        dropped while the buffer is full."""
        while True:
            e = self._next_event(0.1)
            if e is not None:
                yield e
            elif self._events_closed.is_set() and self._events.empty():
                return

    async def aevents(self) -> AsyncIterator[Event]:
        """aevents is events() for asyncio (``async for event in lock.aevents()``)."""
        while True:
            e = await asyncio.to_thread(self._next_event, 0.25)
            if e is not None:
                yield e
            elif self._events_closed.is_set() and self._events.empty():
                return

    def _next_event(self, timeout: float) -> Event | None:
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    # --- what the application does ----------------------------------------------------------------

    def release(self, timeout: float = 10.0) -> None:
        """release stops believing in the term first, then asks the agent to release the lock (and
        withdraw a Mutex request), bounded by ``timeout`` seconds. Idempotent: later calls do
        nothing more and raise what the first one raised (an agent that could not be told lets the
        Lease expire)."""
        with self._release_mu:
            if not self._released:
                self._released = True
                self._end(LockReleasedError(f"lock {self.name} released"))
                self._agent.abort()  # a state read in flight is moot now
                try:
                    self._agent.do("POST", self._agent.path("/release"), timeout)
                except FencepostError as e:
                    self._release_error = e
                for t in self._threads:
                    t.join(timeout)
            err = self._release_error
        if err is not None:
            raise err

    async def release_async(self, timeout: float = 10.0) -> None:
        """release_async is release() for asyncio (it runs in a worker thread)."""
        await asyncio.to_thread(self.release, timeout)

    def complete(self, timeout: float = 10.0) -> Snapshot:
        """complete reports the run id of the acquire completed — only the holder of the run's term
        can: after a loss it raises a LockLostError (NotHeldProblem) and reports nothing. Release
        afterwards."""
        if self._run_id is None:
            raise ValueError("fencepost: complete() needs acquire(run_id=...)")
        q = {"runId": self._run_id, "token": format_token(self._token)}
        return self._agent.do("POST", self._agent.path("/complete", q), timeout)

    async def complete_async(self, timeout: float = 10.0) -> Snapshot:
        """complete_async is complete() for asyncio."""
        return await asyncio.to_thread(self.complete, timeout)

    def __enter__(self) -> Lock:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    async def __aenter__(self) -> Lock:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.release_async()

    def __repr__(self) -> str:
        return f"<fencepost.Lock {self.name!r} token={self._token} ended={self._ended.is_set()}>"

    # --- the term's machinery ---------------------------------------------------------------------

    def _remaining_locked(self) -> float:
        mono0, wall0 = self._valid_from
        return remaining(self._valid_for, _monotonic() - mono0, _wall() - wall0)

    def _end(self, err: FencepostError) -> None:
        """_end ends the term with err (only the first end counts)."""
        with self._mu:
            if self._error is not None:
                return
            self._error = err
            callbacks, self._on_end = self._on_end, []
            stream = self._stream
        self._ended.set()
        self._kick.set()
        if stream is not None:
            _shutdown(stream)
        for cb in callbacks:
            cb()

    def _refresh(self, timeout: float) -> tuple[LockLostError | None, FencepostError | None]:
        """_refresh reads the agent's state and counts the term's time left from when the read was
        sent. It returns (lost, None) when the read shows the term over, (None, error) when the read
        failed — which changes nothing: the term runs out unless a later read succeeds."""
        sent = (_monotonic(), _wall())
        try:
            s = self._agent.do("GET", self._agent.path(), timeout)
        except FencepostError as e:
            return None, e
        if not s.held or s.token != self._token:
            return LockLostError(f"lock {self.name} lost: the agent says {s.state}"), None
        with self._mu:
            if self._error is None:
                self._valid_from, self._valid_for = sent, (s.expires_in_ms or 0.0) / 1000
        return None, None

    def _start(self) -> None:
        for target in (self._refresher, self._watchdog, self._follow):
            t = threading.Thread(target=target, name=f"fencepost-{self.name}-{target.__name__}", daemon=True)
            self._threads.append(t)
            t.start()

    def _refresher(self) -> None:
        """_refresher re-reads the state when an event asks for it, and at least every third of the term."""
        while not self._ended.is_set():
            with self._mu:
                every = max(self._valid_for / 3, 0.2)
            self._kick.wait(every)
            self._kick.clear()
            if self._ended.is_set():
                return
            lost, _ = self._refresh(_READ_TIMEOUT)
            if lost is not None:
                self._end(lost)

    def _watchdog(self) -> None:
        """_watchdog ends the term when its time runs out, re-reading the clocks at least every
        250 ms so that a deadline passed during a pause is noticed right after it."""
        while True:
            with self._mu:
                left = self._remaining_locked()
            if left <= 0:
                self._end(LockLostError(f"lock {self.name}: the term's time ran out"))
                return
            if self._ended.wait(min(left, 0.25)):
                return

    def _follow(self) -> None:
        """_follow reads the lock's event stream (SSE), reconnecting with Last-Event-ID until the
        term ends."""
        last_id = ""
        try:
            while not self._ended.is_set():
                conn = self._agent.connect(_STREAM_TIMEOUT)
                try:
                    headers = {"Accept": "text/event-stream"}
                    if last_id:
                        headers["Last-Event-ID"] = last_id
                    conn.request("GET", self._agent.path("/events"), headers=headers)
                    # The socket itself: a response that reads until the connection closes takes
                    # it over from conn, and _end must still be able to cut it.
                    with self._mu:
                        self._stream = conn.sock
                        ended = self._error is not None
                    if ended:
                        return
                    res = conn.getresponse()
                    if res.status == 200:
                        for m in parse_sse(_lines(res)):
                            if m.id:
                                last_id = m.id
                            self._handle(m)
                except (OSError, http.client.HTTPException, ValueError):
                    pass
                finally:
                    with self._mu:
                        self._stream = None
                    self._agent.done(conn)
                self._ended.wait(1.0)
        finally:
            self._events_closed.set()

    def _handle(self, m: SSEMessage) -> None:
        """_handle acts on one event: a state or a renewal asks for a fresh read; lost or released
        of this term ends it; every event but state is passed on."""
        if m.event == "state":
            self._kick.set()
            return
        try:
            e = Event.from_json(json.loads(m.data))
        except ValueError:
            return
        with contextlib.suppress(queue.Full):
            self._events.put_nowait(e)
        if e.type in ("lost", "released") and e.token == self._token:
            self._end(LockLostError(f"lock {self.name} {e.type}: {e.reason or ''}"))
        elif e.type in ("granted", "renewed") and e.token != self._token:
            self._end(LockLostError(f"lock {self.name}: a term with token {e.token} began"))
        elif e.type in ("granted", "renewed"):
            self._kick.set()


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _lines(res: http.client.HTTPResponse) -> Generator[str, None, None]:
    while True:
        line = res.readline(1 << 20)
        if not line:
            return
        yield line.decode("utf-8", "replace")


def acquire(
    lock: str,
    *,
    wait: float | None = None,
    run_id: str | None = None,
    if_held: IfHeld | None = None,
    base_url: str | None = None,
) -> Lock:
    """acquire asks the agent for the lock and waits until it is granted or ``wait`` seconds passed
    (None, the default: as long as it takes; 0: ask once without waiting).

    It returns a held Lock — release it, or use it as a context manager — or raises:
    NotAcquiredError (not granted in time, or held elsewhere with ``if_held="fail"``: a
    LockHeldProblem naming the holder; a request left queued is withdrawn), AlreadyDoneError
    (``run_id`` already completed), LockLostError (lost before acquire returned), another
    ProblemError of the agent, or AgentRequestError. The agent is ``base_url``, else
    $FENCEPOST_AGENT_URL, else http://127.0.0.1:7370. ``run_id`` asks for a Mutex run once per id
    (Lock.complete() reports it done).
    """
    return _acquire(Agent(lock, base_url), wait=wait, run_id=run_id, if_held=if_held, abort=None)


def _acquire(
    agent: Agent,
    *,
    wait: float | None,
    run_id: str | None,
    if_held: IfHeld | None,
    abort: threading.Event | None,
) -> Lock:
    if if_held not in (None, "wait", "fail"):
        raise ValueError(f"fencepost: if_held must be 'wait' or 'fail', got {if_held!r}")
    if wait is not None and wait < 0:
        raise ValueError(f"fencepost: wait must not be negative, got {wait}")
    try:
        snap = _ask(agent, wait=wait, run_id=run_id, if_held=if_held, abort=abort)
    except _Asked as a:
        # Withdraw only what this call may have left queued: never when it asked nothing (another
        # process of the pod may hold the lock through the same agent), nor after held or
        # already-done (the agent left nothing).
        if a.asked and not isinstance(a.error, (LockHeldProblem, AlreadyDoneProblem)):
            agent.withdraw()
        raise a.error from a.error.__cause__
    if not snap.held or snap.token is None:
        agent.withdraw()
        raise LockLostError(f"lock {agent.lock}: the agent answered the acquire with state {snap.state}")
    held = Lock(agent, snap.token, snap.permit, run_id)
    # The acquire may have waited long: its answer's time left is counted from a fresh read.
    lost, read_err = held._refresh(_READ_TIMEOUT)
    if read_err is not None:
        lost = LockLostError(f"lock {agent.lock} granted, but its state could not be read: {read_err}")
    if lost is not None:
        held._end(lost)
    if held.error is not None:
        agent.withdraw()
        raise held.error
    held._start()
    return held


class _Asked(Exception):
    """_Asked carries an acquire's failure and whether any request was sent."""

    def __init__(self, error: FencepostError, asked: bool) -> None:
        self.error, self.asked = error, asked


def _ask(
    agent: Agent,
    *,
    wait: float | None,
    run_id: str | None,
    if_held: IfHeld | None,
    abort: threading.Event | None,
) -> Snapshot:
    """_ask asks until granted, refused, out of time or aborted; failures are _Asked."""
    deadline = None if wait is None else _monotonic() + wait
    sent = False
    while True:
        if abort is not None and abort.is_set():
            raise _Asked(NotAcquiredError(f"lock {agent.lock} not granted: the wait was cancelled"), sent)
        per_request = _MAX_WAIT_PER_REQUEST
        if deadline is not None:
            left = deadline - _monotonic()
            if sent and left <= 0:
                raise _Asked(NotAcquiredError(f"lock {agent.lock} not granted within {wait:g} s"), sent)
            per_request = max(0.0, min(per_request, left))
        q = {"wait": f"{int(per_request * 1000)}ms"}
        if run_id is not None:
            q["runId"] = run_id
        if if_held is not None:
            q["ifHeld"] = if_held
        sent = True
        try:
            return agent.do("POST", agent.path("/acquire", q), per_request + 10)
        except NotGrantedProblem:
            continue  # ask again while the wait allows (a Mutex request keeps its place)
        except AgentRequestError as e:
            if abort is not None and abort.is_set():
                err = NotAcquiredError(f"lock {agent.lock} not granted: the wait was cancelled")
            elif deadline is not None and _monotonic() >= deadline:
                err = NotAcquiredError(f"lock {agent.lock} not granted within {wait:g} s: {e}")
            else:
                raise _Asked(e, sent) from e
            err.__cause__ = e
            raise _Asked(err, sent) from e
        except FencepostError as e:  # another problem, an answer that breaks the contract, ...
            raise _Asked(e, sent) from e


class AcquireAsync:
    """AcquireAsync is what acquire_async() returns: await it for a Lock, or use it with
    ``async with`` (the lock is released on exit)."""

    def __init__(
        self, lock: str, wait: float | None, run_id: str | None, if_held: IfHeld | None, base_url: str | None
    ) -> None:
        self._agent = Agent(lock, base_url)
        self._args = (wait, run_id, if_held)
        self._lock: Lock | None = None

    def __await__(self) -> Generator[object, None, Lock]:
        return self._run().__await__()

    async def _run(self) -> Lock:
        wait, run_id, if_held = self._args
        abort = threading.Event()
        agent = self._agent
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(
            None, lambda: _acquire(agent, wait=wait, run_id=run_id, if_held=if_held, abort=abort)
        )
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            # Stop the request in flight; the worker withdraws what it asked, and a lock granted in
            # the race is released.
            abort.set()
            agent.abort()

            def drop(f: asyncio.Future[Lock]) -> None:
                if not f.cancelled() and f.exception() is None:
                    threading.Thread(target=_release_quietly, args=(f.result(),), daemon=True).start()

            fut.add_done_callback(drop)
            raise

    async def __aenter__(self) -> Lock:
        self._lock = await self
        return self._lock

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._lock is not None:
            await self._lock.release_async()


def _release_quietly(lock: Lock) -> None:
    with contextlib.suppress(FencepostError):
        lock.release()


def acquire_async(
    lock: str,
    *,
    wait: float | None = None,
    run_id: str | None = None,
    if_held: IfHeld | None = None,
    base_url: str | None = None,
) -> AcquireAsync:
    """acquire_async is acquire() for asyncio: ``async with acquire_async("billing", wait=30) as
    lock:`` (released on exit), or ``lock = await acquire_async(...)``.

    The requests run in the event loop's default executor (the agent is on loopback and the
    requests are few, so a worker thread costs less than an async HTTP dependency would); a
    cancelled wait cuts its request, withdraws what it asked and releases a grant that raced it.
    """
    return AcquireAsync(lock, wait, run_id, if_held, base_url)
