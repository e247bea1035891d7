"""The stores' I/O on redis-py: one Redis (src/stores/redis/backend.ts) and N Redlock masters
(src/stores/redlock/quorum.ts, masters.ts), each a backend for one lock that the hold
(_hold.py) drives. The backends know nothing of timers; the hold knows nothing of Redis.

Client options chosen for a lock, where a late answer is worth less than none: no retries inside
redis-py (a command that failed is retried by the waiter or the watchdog, which know the
deadlines), a socket timeout so that a server that stopped answering (SIGSTOP, a partition) fails
the command instead of holding it — 2 s for one Redis, 500 ms per Redlock master.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import redis
import redis.client
import redis.exceptions
from redis.backoff import NoBackoff
from redis.retry import Retry

from .._errors import FencepostError
from .._protocol import COMMAND_TIMEOUT_MS, MASTER_TIMEOUT_MS, MAX_TOKEN
from .._token import parse_token
from ._clock import StoreClock
from ._keys import LockKeys
from ._scripts import Script, script
from ._timing import valid_until
from ._url import RedisTarget

COMMAND_TIMEOUT = COMMAND_TIMEOUT_MS / 1000
"""COMMAND_TIMEOUT is COMMAND_TIMEOUT_MS in seconds, as redis-py takes it."""
MASTER_TIMEOUT = MASTER_TIMEOUT_MS / 1000
"""MASTER_TIMEOUT is MASTER_TIMEOUT_MS in seconds, as redis-py takes it."""

T = TypeVar("T")


class StoreError(FencepostError):
    """StoreError: a request to a lock store failed (Redis down, a timeout, too few Redlock masters
    answered, an answer that breaks the scripts' contract)."""


@dataclass(frozen=True, slots=True)
class Grant:
    """Grant is an attempt that took the lock: its token, the end of trust on the store's clock,
    whether the counter was missing (a new lock, or Redis lost its data), and whether the token was
    floored at the Redis server's clock (the Redis process issuing it is not the one that issued the
    last: a new or lost counter, a failover, a restart, a moved slot; on Redlock, on any master of
    the majority)."""

    token: int
    valid_until_ms: float
    counter_missing: bool
    clock_floored: bool


@dataclass(frozen=True, slots=True)
class Refusal:
    """Refusal is an attempt that did not take the lock. ``held``: another owner holds it (False:
    the store did not answer, too few masters, the validity was spent); ``held_for_ms``: the
    holder key's PTTL when Redis said."""

    held: bool
    reason: str
    held_for_ms: int | None = None


class Backend(Protocol):
    """Backend is one lock in one store. Every method but release may raise StoreError."""

    def try_acquire(self, owner: str, ttl_ms: int, floor: int) -> Grant | Refusal:
        """try_acquire takes the lock for ``owner`` with a TTL, issuing a token above ``floor``."""
        ...

    def renew(self, owner: str, ttl_ms: int) -> bool:
        """renew extends the TTL: True renewed, False the key is not ``owner``'s any more."""
        ...

    def release(self, owner: str) -> None:
        """release gives the lock up if ``owner`` still holds it, and tells waiters."""
        ...

    def subscribe(self, on_release: Callable[[str], None], confirmed: threading.Event) -> Callable[[], None]:
        """subscribe calls ``on_release`` with the releasing owner id when the lock is released (on
        Redlock: once a majority of the masters published that owner's release); sets
        ``confirmed`` once the store confirmed the subscription; returns the unsubscribe."""
        ...


def _text(v: Any) -> Any:
    return v.decode("utf-8") if isinstance(v, bytes) else v


def connect_target(t: RedisTarget, timeout: float) -> redis.Redis:
    """connect_target makes a redis-py client for ``t`` (it connects on first use)."""
    return redis.Redis(
        host=t.endpoint.host,
        port=t.endpoint.port,
        db=t.db,
        username=t.username,
        password=t.password,
        ssl=t.tls,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        decode_responses=True,
    )


def run_script(client: redis.Redis, s: Script, keys: Sequence[str], args: Sequence[str], where: str) -> Any:
    """run_script runs ``s`` with EVALSHA, and with EVAL after NOSCRIPT (store.json "scripts");
    a failure is a StoreError naming ``where``."""
    try:
        try:
            return client.evalsha(s.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            return client.eval(s.source, len(keys), *keys, *args)
    except (redis.exceptions.RedisError, OSError) as e:
        raise StoreError(f"{where}: {type(e).__name__}: {e}") from e


class _Listener:
    __slots__ = ("confirmed", "on_message")

    def __init__(self, on_message: Callable[[str], None], confirmed: threading.Event) -> None:
        self.on_message, self.confirmed = on_message, confirmed


CHANNEL_IDLE = 10.0
"""CHANNEL_IDLE: how long (seconds) a release channel stays subscribed after its last listener
left, so that a process taking the same lock again and again subscribes once."""


class ReleaseChannels:
    """ReleaseChannels is one subscriber connection (made on first use) for every lock's release
    channel on one Redis, read by one daemon thread. A channel stays subscribed for CHANNEL_IDLE
    after its last listener left. A subscription that fails (Redis down) is retried by the
    thread, and redis-py re-subscribes after a reconnect; a notification lost meanwhile is found by
    the waiter's backoff.

    Locks: ``_io`` orders the SUBSCRIBE and UNSUBSCRIBE sent with the decisions to send them (so
    the server's state is the one recorded); ``_mu`` guards the records, and is never held while
    sending. The reader reads without either.
    """

    def __init__(self, client: redis.Redis, name: str) -> None:
        self._client = client
        self._name = name
        self._io = threading.Lock()
        self._mu = threading.Lock()
        self._listeners: dict[str, list[_Listener]] = {}
        self._idle_since: dict[str, float] = {}
        self._confirmed: set[str] = set()
        self._pubsub: redis.client.PubSub | None = None
        self._closed = threading.Event()

    def listen(
        self, channel: str, on_message: Callable[[str], None], confirmed: threading.Event
    ) -> Callable[[], None]:
        """listen calls ``on_message`` with every message on ``channel`` (a release publishes the
        released owner id) and sets ``confirmed`` once subscribed; returns the unsubscribe."""
        entry = _Listener(on_message, confirmed)
        with self._io:
            with self._mu:
                if self._closed.is_set():
                    raise StoreError(f"{self._name}: the store is closed")
                first = channel not in self._listeners
                self._listeners.setdefault(channel, []).append(entry)
                self._idle_since.pop(channel, None)
                if channel in self._confirmed:
                    confirmed.set()
                ps = self._start_locked()
            if first:
                with contextlib.suppress(Exception):  # the reader retries it
                    ps.subscribe(channel)

        def unsubscribe() -> None:
            with self._mu:
                own = self._listeners.get(channel)
                if own is not None and entry in own:
                    own.remove(entry)
                    if not own:
                        self._idle_since[channel] = time.monotonic()

        return unsubscribe

    def close(self) -> None:
        """close stops the reader thread, which closes the subscriber connection (within 200 ms:
        close does not wait for it)."""
        with self._mu:
            self._closed.set()
            self._listeners.clear()

    def _start_locked(self) -> redis.client.PubSub:
        if self._pubsub is None:
            self._pubsub = self._client.pubsub(ignore_subscribe_messages=False)
            threading.Thread(
                target=self._read,
                args=(self._pubsub,),
                name=f"fencepost-store-channels-{self._name}",
                daemon=True,
            ).start()
        return self._pubsub

    def _tend(self, ps: redis.client.PubSub) -> None:
        """_tend subscribes what is missing (after a failure) and unsubscribes what idled out (and
        anything else subscribed without a listener: an UNSUBSCRIBE lost to a reconnect)."""
        with self._io:
            now = time.monotonic()
            with self._mu:
                for c in [c for c, t in self._idle_since.items() if now - t >= CHANNEL_IDLE]:
                    del self._idle_since[c]
                    del self._listeners[c]
                    self._confirmed.discard(c)
                missing = [c for c in self._listeners if c not in ps.channels]
                stray = [c for c in ps.channels if c not in self._listeners]
            if missing:
                ps.subscribe(*missing)
            if stray:
                ps.unsubscribe(*stray)  # type: ignore[no-untyped-call]

    def _read(self, ps: redis.client.PubSub) -> None:
        pause = 0.05
        try:
            while not self._closed.is_set():
                try:
                    self._tend(ps)
                    m = ps.get_message(timeout=0.2)
                    pause = 0.05
                except Exception:
                    self._closed.wait(pause)
                    pause = min(pause * 2, 1.0)
                    continue
                if m is not None:
                    self._dispatch(m)
        finally:
            with contextlib.suppress(Exception):
                ps.close()

    def _dispatch(self, m: dict[str, Any]) -> None:
        kind, channel = _text(m.get("type")), _text(m.get("channel"))
        with self._mu:
            listeners = list(self._listeners.get(channel, ()))
            if kind == "subscribe" and channel in self._listeners:
                self._confirmed.add(channel)
            elif kind == "unsubscribe":
                self._confirmed.discard(channel)
        if kind == "subscribe":
            for entry in listeners:
                entry.confirmed.set()
        elif kind == "message":
            data = _text(m.get("data"))
            for entry in listeners:
                entry.on_message(data if isinstance(data, str) else str(data))


class RedisBackend:
    """RedisBackend is one lock on one Redis: a grant is one script (the holder key and the token
    together), a renew a compare-and-PEXPIRE, a release a compare-and-DEL that publishes."""

    def __init__(
        self, client: redis.Redis, channels: ReleaseChannels, keys: LockKeys, display: str, clock: StoreClock
    ) -> None:
        self._client, self._channels, self._keys = client, channels, keys
        self._display, self._clock = display, clock

    def try_acquire(self, owner: str, ttl_ms: int, floor: int) -> Grant | Refusal:
        k = self._keys
        # Before the request: the key's TTL starts no earlier than this.
        sent = self._clock.ms()
        reply = run_script(
            self._client,
            script("acquire"),
            [k.holder, k.counter, k.epoch],
            [owner, str(ttl_ms), str(floor)],
            self._display,
        )
        if not isinstance(reply, list) or len(reply) < 2:
            raise StoreError(f"{self._display}: unexpected reply to the acquire script: {reply!r}")
        if reply[0] != 1:
            pttl = reply[1] if isinstance(reply[1], int) and reply[1] >= 0 else None
            return Refusal(held=True, held_for_ms=pttl, reason=f"held by another owner in {self._display}")
        try:
            token = parse_token(_text(reply[1]), f"token from Redis key {k.counter}")
        except FencepostError as e:
            raise StoreError(f"{self._display}: {e}") from e
        if token <= floor:
            raise StoreError(f"{self._display}: token {token} not above floor {floor} for {k.counter}")
        # {1, token, refloored, hadTtl, existed, epochChanged} (store-acquire.lua).
        existed = reply[4] if len(reply) > 4 else 0
        epoch_changed = reply[5] if len(reply) > 5 else 0
        return Grant(
            token, valid_until(sent, ttl_ms), counter_missing=existed != 1, clock_floored=epoch_changed == 1
        )

    def renew(self, owner: str, ttl_ms: int) -> bool:
        reply = run_script(
            self._client, script("renew"), [self._keys.holder], [owner, str(ttl_ms)], self._display
        )
        return bool(reply == 1)

    def release(self, owner: str) -> None:
        k = self._keys
        run_script(self._client, script("release"), [k.holder], [owner, k.channel], self._display)

    def subscribe(self, on_release: Callable[[str], None], confirmed: threading.Event) -> Callable[[], None]:
        return self._channels.listen(self._keys.channel, on_release, confirmed)


@dataclass(frozen=True, slots=True)
class Master:
    """Master is one Redlock master: its client, its release channels and its name (host:port)."""

    name: str
    client: redis.Redis
    channels: ReleaseChannels


def quorum(n: int) -> int:
    """quorum is the majority of ``n`` masters."""
    return n // 2 + 1


@dataclass(frozen=True, slots=True)
class _Took:
    master: Master
    counter: int
    existed: bool
    epoch_changed: bool


class RedlockBackend:
    """RedlockBackend is one lock over N masters (Redlock, plus a token that stays monotonic across
    majorities: store.json "tokens.redlock", src/stores/redlock/quorum.ts's module comment says why).

    Acquire: note the time BEFORE sending; on every master in parallel, each bounded by 500 ms, the
    redlockAcquire script (SET NX PX the holder key and advance that master's counter); held if a
    majority took it within the validity; token = the largest counter the majority answered; if a
    majority answered exactly the token, the grant counts; otherwise the token is raised on the
    masters that granted and the grant counts only if a majority acknowledged it within the
    validity. Any failure releases on every master.
    """

    def __init__(
        self,
        masters: Sequence[Master],
        pool: ThreadPoolExecutor,
        keys: LockKeys,
        clock: StoreClock,
        master_timeout: float = MASTER_TIMEOUT,
    ) -> None:
        self._masters = list(masters)
        self._pool, self._keys, self._clock, self._timeout = pool, keys, clock, master_timeout
        self._n = len(self._masters)
        self._q = quorum(self._n)

    def _each(self, masters: Sequence[Master], call: Callable[[Master], T]) -> list[T | Exception]:
        """_each runs ``call`` on every master in parallel, each bounded by the master timeout; a
        master that failed or did not answer in time is its exception."""
        futures: list[Future[T]] = [self._pool.submit(call, m) for m in masters]
        wait_futures(futures, timeout=self._timeout)
        out: list[T | Exception] = []
        for m, f in zip(masters, futures, strict=True):
            if not f.done():
                f.cancel()
                out.append(StoreError(f"{m.name}: no answer within {int(self._timeout * 1000)} ms"))
                continue
            e = f.exception()
            if e is None:
                out.append(f.result())
            elif isinstance(e, Exception):
                out.append(e)
            else:
                raise e
        return out

    def _release_all(self, owner: str) -> None:
        k = self._keys
        self._each(
            self._masters,
            lambda m: run_script(m.client, script("release"), [k.holder], [owner, k.channel], m.name),
        )

    def try_acquire(self, owner: str, ttl_ms: int, floor: int) -> Grant | Refusal:
        k, n, q = self._keys, self._n, self._q
        # 1. The time before anything is sent: every key's TTL starts after it.
        started = self._clock.ms()
        validity = valid_until(started, ttl_ms)
        acquire = script("redlockAcquire")
        answers = self._each(
            self._masters,
            lambda m: run_script(
                m.client, acquire, [k.holder, k.counter, k.epoch], [owner, str(ttl_ms), str(floor)], m.name
            ),
        )
        took: list[_Took] = []
        held = 0
        held_for: int | None = None
        for m, a in zip(self._masters, answers, strict=True):
            if isinstance(a, Exception) or not isinstance(a, list) or len(a) < 2:
                continue
            if a[0] == 1:
                try:
                    counter = parse_token(_text(a[1]), f"counter {k.counter} on {m.name}")
                except FencepostError:
                    continue
                # {1, v, existed, epochChanged} (redlock-acquire.lua).
                took.append(_Took(m, counter, len(a) > 2 and a[2] == 1, len(a) > 3 and a[3] == 1))
            else:
                held += 1
                if isinstance(a[1], int) and a[1] >= 0:
                    held_for = a[1] if held_for is None else min(held_for, a[1])
        # 2. A majority, within the validity.
        if len(took) < q:
            self._release_all(owner)
            return Refusal(
                # Held when the others' keys alone keep a majority out of reach (not merely masters down).
                held=held > n - q,
                held_for_ms=held_for,
                reason=(
                    f"{len(took)} of {n} masters granted, {q} needed "
                    f"({held} held by another owner, {n - len(took) - held} did not answer)"
                ),
            )
        if self._clock.ms() >= validity:
            self._release_all(owner)
            return Refusal(held=False, reason="the validity was spent acquiring a majority")
        # 3. The token: the largest counter the majority advanced to (each is above the floor).
        token = max([floor + 1, *(t.counter for t in took)])
        if token > MAX_TOKEN:
            self._release_all(owner)
            raise StoreError(f"the fencing counter reached its maximum {MAX_TOKEN}")
        counter_missing = all(not t.existed for t in took)
        clock_floored = any(t.epoch_changed for t in took)
        # 4. Already at the token on a majority: counted. Else raised on the masters that granted,
        # and counted only when a majority acknowledged it in time.
        if sum(1 for t in took if t.counter == token) >= q:
            return Grant(token, validity, counter_missing, clock_floored)
        raise_ = script("redlockRaise")
        acks = self._each(
            [t.master for t in took],
            lambda m: run_script(m.client, raise_, [k.holder, k.counter], [owner, str(token)], m.name),
        )
        acked = sum(1 for a in acks if a == 1)
        if acked < q or self._clock.ms() >= validity:
            self._release_all(owner)
            return Refusal(
                held=False,
                reason=(
                    f"{acked} of {n} masters acknowledged token {token}, {q} needed"
                    if acked < q
                    else "the validity was spent writing the token"
                ),
            )
        return Grant(token, validity, counter_missing, clock_floored)

    def renew(self, owner: str, ttl_ms: int) -> bool:
        k, n, q = self._keys, self._n, self._q
        renew = script("renew")
        answers = self._each(
            self._masters, lambda m: run_script(m.client, renew, [k.holder], [owner, str(ttl_ms)], m.name)
        )
        yes = sum(1 for a in answers if a == 1)
        no = sum(1 for a in answers if not isinstance(a, Exception) and a != 1)
        if yes >= q:
            return True
        # So many masters say "not yours" that a majority is out of reach: lost, no need to wait.
        if no > n - q:
            return False
        raise StoreError(f"{yes} of {n} masters renewed, {q} needed ({no} said not the owner)")

    def release(self, owner: str) -> None:
        self._release_all(owner)

    def subscribe(self, on_release: Callable[[str], None], confirmed: threading.Event) -> Callable[[], None]:
        # Every master, in parallel (a master that does not answer must not hold the others up):
        # a release is published where it happened; the first confirmation counts.
        #
        # The waiter is told of a release only once a majority of the masters published the same
        # owner id, and once: a holder's release publishes on every master it held (a majority),
        # while a failed attempt that gives back the minority it took publishes on fewer. Woken by
        # those give-backs, waiters retried at once for as long as the holder held (two waiters on
        # a lock held on 3 of 5 masters: 548-758 attempts in a second). A release heard on fewer
        # masters (keys that expired there, a master down) is found by the backoff.
        channel, need = self._keys.channel, self._q
        mu = threading.Lock()
        heard: OrderedDict[str, int] = OrderedDict()  # owner id -> masters that published it, oldest first

        def count(owner: str) -> None:
            with mu:
                n = heard.pop(owner, 0) + 1
                if len(heard) >= HEARD_OWNERS:
                    heard.popitem(last=False)
                heard[owner] = n
            if n == need:
                on_release(owner)

        try:
            futures = [self._pool.submit(m.channels.listen, channel, count, confirmed) for m in self._masters]
        except RuntimeError as e:  # the store was closed
            raise StoreError(str(e)) from e

        def off() -> None:
            for f in futures:
                f.add_done_callback(_unsubscribe_when_done)

        return off


HEARD_OWNERS = 64
"""HEARD_OWNERS bounds the owner ids whose per-master release messages a Redlock waiter counts."""


def _unsubscribe_when_done(f: Future[Callable[[], None]]) -> None:
    if not f.cancelled() and f.exception() is None:
        f.result()()
