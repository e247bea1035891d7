"""The Redis keys of one store lock (src/stores/redis/keys.ts; clients/conformance/store.json "keys").

The fencing counter is the controller's own key, ``fencepost:fence:<namespace>/<name>``, so a
lock's tokens continue when it moves between the controller's grants and a store. The holder key
carries that counter key as a Redis Cluster hash tag, ``fencepost:lock:{fencepost:fence:<ns>/<name>}``,
and so does the epoch key, ``fencepost:epoch:{fencepost:fence:<ns>/<name>}``, so that the three keys
hash to one slot and one script may touch them all. Lock and namespace names are DNS
labels, checked before a key is made, so no ``{``, ``}`` or ``/`` of theirs can change what is
hashed or climb out of the namespace's prefix.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .._protocol import (
    CHANNEL_PREFIX,
    COUNTER_KEY_PREFIX,
    EPOCH_KEY_PREFIX,
    HOLDER_KEY_PREFIX,
)

_DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)


def is_dns_label(name: str) -> bool:
    """is_dns_label: ``name`` is an RFC 1123 label (a-z, 0-9 and ``-``, starting and ending with a
    letter or digit, at most 63 characters), what a lock name and a namespace must be."""
    return _DNS_LABEL.fullmatch(name) is not None


def check_name(name: str, what: str) -> str:
    """check_name returns ``name`` if it is a DNS label, else raises ValueError naming ``what``
    and the value."""
    if not isinstance(name, str) or not is_dns_label(name):
        raise ValueError(
            f"fencepost: {what} must be a DNS label (a-z, 0-9, -; at most 63), got {json.dumps(name)}"
        )
    return name


@dataclass(frozen=True, slots=True)
class LockKeys:
    """LockKeys are the keys and the release channel of one lock."""

    holder: str
    """holder: the key whose value is the current owner id (set with a TTL)."""
    counter: str
    """counter: the fencing counter (never deleted, never given a TTL)."""
    epoch: str
    """epoch: the replication ID (INFO replication master_replid) of the Redis master that last
    issued a token for this lock, new whenever a node becomes a master (fence-next.lua fence_epoch):
    when another one issues the next token (a failover, a failback, a restart), the counter jumps by
    1,000 and the token is floored at the clock."""
    channel: str
    """channel: where a release is published, for waiters."""


def lock_keys(namespace: str, name: str) -> LockKeys:
    """lock_keys names the keys of lock ``name`` in ``namespace`` (both checked: ValueError)."""
    check_name(namespace, "namespace")
    check_name(name, "lock name")
    counter = f"{COUNTER_KEY_PREFIX}{namespace}/{name}"
    return LockKeys(
        holder=f"{HOLDER_KEY_PREFIX}{{{counter}}}",
        counter=counter,
        epoch=f"{EPOCH_KEY_PREFIX}{{{counter}}}",
        channel=f"{CHANNEL_PREFIX}{namespace}/{name}",
    )
