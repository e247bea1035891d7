"""fencepost.guard: make a resource refuse the writes of a holder whose fencing token is below the
highest it has accepted.

- RedisGuard / AsyncRedisGuard (redis-py, ``pip install fencepost[redis]``): the Redis fenced
  write — the very Lua script the TypeScript and Go guards run,
  clients/conformance/redis-fenced-write.lua, shipped in the package as a byte-for-byte copy
  (a test compares the two).
- SQLGuard / AsyncSQLGuard (psycopg 3, ``pip install fencepost[postgres]``): the SQL fenced update
  for PostgreSQL; the statements are the TypeScript guard's, byte for byte.

Both keep **one mark per lock** by default: once the holder of token N+1 has written, deleted or
advanced anything under the lock, the holder of token N can do nothing — not write a key or row
N+1 never touched, not insert a new row, not bring back a deleted one. An equal token is accepted
(the same holder writing again in its term). Only writes through a guard are fenced.

The drivers are imported only by the classes that need them.
"""

from ._outcome import Outcome
from ._redis import (
    DEFAULT_LOCK,
    DEFAULT_WRITE_ID_TTL,
    RESERVED_KEY_PREFIX,
    AsyncRedisGuard,
    RedisGuard,
    RedisResult,
    Scope,
    fenced_write_lua,
)
from ._sql import (
    DEFAULT_FENCE_TABLE,
    AsyncSQLGuard,
    IdentifierError,
    SQLGuard,
    SQLSpec,
    Statements,
    build_statements,
    fence_table_sql,
)

__all__ = [
    "DEFAULT_FENCE_TABLE",
    "DEFAULT_LOCK",
    "DEFAULT_WRITE_ID_TTL",
    "RESERVED_KEY_PREFIX",
    "AsyncRedisGuard",
    "AsyncSQLGuard",
    "IdentifierError",
    "Outcome",
    "RedisGuard",
    "RedisResult",
    "SQLGuard",
    "SQLSpec",
    "Scope",
    "Statements",
    "build_statements",
    "fence_table_sql",
    "fenced_write_lua",
]
