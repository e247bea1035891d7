"""fencepost.store: the Redis lock stores natively in Python — one Redis (``redis://``,
``rediss://``) or Redlock over N independent masters (``redlock://``) — with the keys, the Lua
scripts and the token rules of the TypeScript library (src/stores; clients/conformance/store.json),
so that a Python worker and a Node (or Go, or Java) worker contend for the same lock::

    with fencepost.store.acquire("billing", "redis://127.0.0.1:6379", ttl=10, wait=30) as lock:
        guard.write("orders:42", lock.token, value)          # fencepost.guard.RedisGuard

    store = fencepost.store.connect("redlock://r1:6379,r2:6379,r3:6379,r4:6379,r5:6379")
    async with store.acquire_async("ledger", namespace="payments", wait=30) as lock:
        ...

No Kubernetes, no agent: the process holds the lock itself, renewing it every third of the TTL,
and ends it (``lock.ended`` set, ``held()`` False) the moment its validity cannot be vouched for.
Like every lease, it is an efficiency lock on its own: pass ``lock.token`` to a guarded resource,
which refuses the writes of a holder paused past its TTL and replaced (docs/stores.md). Needs
redis-py (``pip install fencepost[redis]``), imported when a store is opened.
"""

from .._protocol import DEFAULT_NAMESPACE, DEFAULT_TTL_MS, MAX_TTL_MS, MIN_REDLOCK_MASTERS, MIN_TTL_MS
from ._api import AcquireStoreAsync, Floor, Store, acquire, acquire_async, connect
from ._hold import IfHeld, StoreLock, StoreLockHeldError
from ._keys import LockKeys, is_dns_label, lock_keys
from ._owner import Pod, new_owner_id, pod_of_owner
from ._redis import COMMAND_TIMEOUT, MASTER_TIMEOUT, StoreError, quorum
from ._timing import drift_ms, renew_every_ms
from ._url import (
    Endpoint,
    RedisTarget,
    StoreSpec,
    StoreUrlError,
    parse_store_url,
    redact,
)

__all__ = [
    "COMMAND_TIMEOUT",
    "DEFAULT_NAMESPACE",
    "DEFAULT_TTL_MS",
    "MASTER_TIMEOUT",
    "MAX_TTL_MS",
    "MIN_REDLOCK_MASTERS",
    "MIN_TTL_MS",
    "AcquireStoreAsync",
    "Endpoint",
    "Floor",
    "IfHeld",
    "LockKeys",
    "Pod",
    "RedisTarget",
    "Store",
    "StoreError",
    "StoreLock",
    "StoreLockHeldError",
    "StoreSpec",
    "StoreUrlError",
    "acquire",
    "acquire_async",
    "connect",
    "drift_ms",
    "is_dns_label",
    "lock_keys",
    "new_owner_id",
    "parse_store_url",
    "pod_of_owner",
    "quorum",
    "redact",
    "renew_every_ms",
]
