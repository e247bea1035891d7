"""The Redis fenced write: one Lua script checks the token against the lock's mark and writes,
atomically (clients/conformance/redis-fenced-write.lua; src/guards/redis-guard.ts documents the
keys it uses)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .._errors import FencepostError
from .._protocol import FENCED_WRITE_LUA
from .._token import check_token, parse_token
from ._outcome import Outcome

if TYPE_CHECKING:
    import redis
    import redis.asyncio

RESERVED_KEY_PREFIX = "fencepost:guard:"
"""RESERVED_KEY_PREFIX starts every key a guard names itself; data keys may not start with
``fencepost:`` at all (which also keeps guards off the controller's token counters)."""

DEFAULT_LOCK = "default"
"""DEFAULT_LOCK is the lock name of a guard made without one."""

DEFAULT_WRITE_ID_TTL = timedelta(days=1)
"""DEFAULT_WRITE_ID_TTL is how long applied write ids are remembered by default."""


def fenced_write_lua() -> str:
    """fenced_write_lua is the script, clients/conformance/redis-fenced-write.lua byte for byte
    (generated into fencepost._protocol)."""
    return FENCED_WRITE_LUA


class Scope(enum.StrEnum):
    """Scope says what one mark covers."""

    LOCK = "lock"
    """LOCK keeps one mark per lock for every key written through the guard (the default)."""
    KEY = "key"
    """KEY keeps one mark per data key: weaker — a stale holder can still write every key the newer
    holder has not written, and re-create deleted ones."""


@dataclass(frozen=True, slots=True)
class RedisResult:
    """RedisResult is the outcome of a fenced Redis call and the mark after it (None: no mark yet,
    which only a duplicate with no mark can report)."""

    outcome: Outcome
    mark: int | None

    @property
    def accepted(self) -> bool:
        """accepted is True when the write was applied now or before (DUPLICATE)."""
        return self.outcome is not Outcome.STALE


class _Plan:
    """_Plan names the keys and arguments of the guard's calls (shared by the sync and async guards)."""

    def __init__(self, lock: str | None, scope: Scope | str, write_id_ttl: timedelta) -> None:
        self.scope = Scope(scope)
        if self.scope is Scope.KEY and lock is not None:
            raise ValueError("fencepost guard: lock goes with Scope.LOCK")
        if write_id_ttl < timedelta(milliseconds=1):
            raise ValueError(f"fencepost guard: write_id_ttl must be at least 1 ms, got {write_id_ttl}")
        if lock == "":
            raise ValueError("fencepost guard: lock must not be empty")
        self.lock = lock if lock is not None else DEFAULT_LOCK
        self.ttl_ms = int(write_id_ttl / timedelta(milliseconds=1))

    def mark_key(self, key: str) -> str:
        if self.scope is Scope.LOCK:
            return f"{RESERVED_KEY_PREFIX}lock:{self.lock}"
        return f"{RESERVED_KEY_PREFIX}key:{key}"

    def writes_key(self, key: str) -> str:
        if self.scope is Scope.LOCK:
            return f"{RESERVED_KEY_PREFIX}writes:lock:{self.lock}"
        return f"{RESERVED_KEY_PREFIX}writes:key:{key}"

    def call(self, op: str, key: str, token: int, value: str, write_id: str) -> tuple[list[str], list[str]]:
        t = check_token(token)
        if op == "fence":
            if self.scope is not Scope.LOCK:
                raise ValueError("fencepost guard: advance needs one mark per lock (Scope.LOCK)")
            data = self.mark_key("")
        else:
            if key.startswith("fencepost:"):
                raise ValueError(f"fencepost guard: data key {key!r} is in the reserved fencepost: namespace")
            data = key
        keys = [data, self.mark_key(key), self.writes_key(key)]
        return keys, [str(t), value, write_id, str(self.ttl_ms), op]


def _text(v: Any) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def _result(reply: Any, op: str, key: str) -> RedisResult:
    if not isinstance(reply, list) or len(reply) != 2:
        raise FencepostError(f"fencepost guard: fenced {op} of {key!r}: unexpected script result {reply!r}")
    outcome, mark = _text(reply[0]), _text(reply[1])
    if outcome not in ("applied", "duplicate", "stale"):
        raise FencepostError(f"fencepost guard: fenced {op} of {key!r}: unexpected outcome {outcome!r}")
    return RedisResult(Outcome(outcome), parse_token(mark, "mark") if mark else None)


class RedisGuard:
    """RedisGuard performs fenced writes through a redis-py client (redis.Redis; Cluster works when
    the data keys carry the lock's hash tag: lock="{orders}", keys "{orders}:42").

    The script is sent with EVALSHA, and with EVAL after NOSCRIPT (redis-py's Script). Hazards:
    only writes through the guard are fenced; the mark must live on the same server (and Cluster
    slot) as the data, and never expire (the script removes a TTL it finds).
    """

    def __init__(
        self,
        client: redis.Redis,
        *,
        lock: str | None = None,
        scope: Scope | str = Scope.LOCK,
        write_id_ttl: timedelta = DEFAULT_WRITE_ID_TTL,
    ) -> None:
        """One mark for ``lock`` (default "default"; guards sharing a name share one mark), or one
        per key with ``scope=Scope.KEY``; applied write ids are remembered for ``write_id_ttl``."""
        self._plan = _Plan(lock, scope, write_id_ttl)
        self._client = client
        self._script = client.register_script(fenced_write_lua())

    def mark_key(self, key: str = "") -> str:
        """mark_key is the Redis key of the mark covering ``key`` (any key in Scope.LOCK)."""
        return self._plan.mark_key(key)

    def write(self, key: str, token: int, value: str, write_id: str | None = None) -> RedisResult:
        """write sets ``key`` to ``value`` if ``token`` is not below the mark, and raises the mark to
        it; otherwise it changes nothing and reports STALE with the mark. With a ``write_id``, an
        id already applied within the window is not applied again and is reported DUPLICATE
        (whatever its token): retry a write whose answer was lost with the same id. An invalid token
        (MalformedTokenError) or a key in the reserved ``fencepost:`` namespace (ValueError) is
        refused before anything is sent."""
        if write_id == "":
            raise ValueError("fencepost guard: write_id must not be empty")
        return self._call("set", key, token, value, write_id or "")

    def delete(self, key: str, token: int) -> RedisResult:
        """delete removes ``key`` under the same rule as write (and raises the mark). With one mark
        per lock the mark outlives the key, so a stale holder cannot re-create it."""
        return self._call("del", key, token, "", "")

    def advance(self, token: int) -> RedisResult:
        """advance raises the lock's mark to ``token`` without writing: call it at the start of a term
        to fence out every older token before the first write. Scope.LOCK only."""
        return self._call("fence", "", token, "", "")

    def high_water(self, key: str = "") -> int | None:
        """high_water reads the mark covering ``key`` (any key in Scope.LOCK); None when nothing has
        been accepted yet."""
        v = self._client.get(self.mark_key(key))
        return None if v is None else parse_token(_text(v), "mark")

    def _call(self, op: str, key: str, token: int, value: str, write_id: str) -> RedisResult:
        keys, args = self._plan.call(op, key, token, value, write_id)
        return _result(self._script(keys=keys, args=args), op, keys[0])


class AsyncRedisGuard:
    """AsyncRedisGuard is RedisGuard for a redis.asyncio client: the same script, keys and rules."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        *,
        lock: str | None = None,
        scope: Scope | str = Scope.LOCK,
        write_id_ttl: timedelta = DEFAULT_WRITE_ID_TTL,
    ) -> None:
        """See RedisGuard."""
        self._plan = _Plan(lock, scope, write_id_ttl)
        self._client = client
        self._script = client.register_script(fenced_write_lua())

    def mark_key(self, key: str = "") -> str:
        """mark_key is the Redis key of the mark covering ``key`` (any key in Scope.LOCK)."""
        return self._plan.mark_key(key)

    async def write(self, key: str, token: int, value: str, write_id: str | None = None) -> RedisResult:
        """write: see RedisGuard.write."""
        if write_id == "":
            raise ValueError("fencepost guard: write_id must not be empty")
        return await self._call("set", key, token, value, write_id or "")

    async def delete(self, key: str, token: int) -> RedisResult:
        """delete: see RedisGuard.delete."""
        return await self._call("del", key, token, "", "")

    async def advance(self, token: int) -> RedisResult:
        """advance: see RedisGuard.advance."""
        return await self._call("fence", "", token, "", "")

    async def high_water(self, key: str = "") -> int | None:
        """high_water: see RedisGuard.high_water."""
        v = await self._client.get(self.mark_key(key))
        return None if v is None else parse_token(_text(v), "mark")

    async def _call(self, op: str, key: str, token: int, value: str, write_id: str) -> RedisResult:
        keys, args = self._plan.call(op, key, token, value, write_id)
        return _result(await self._script(keys=keys, args=args), op, keys[0])
