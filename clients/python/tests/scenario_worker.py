"""scenario_worker is a Python worker that test/integration/clients/python.test.ts drives line by
line on stdin, so that it can be paused (SIGSTOP) between its lock check and its write: it
acquires FENCEPOST_LOCK through the agent at FENCEPOST_AGENT_URL, then answers each command with
one JSON line on stdout. Commands: "check" (held now), "write VALUE" (write VALUE under the token
through the Redis guard, key scenario:value, and the SQL guard, table scenario row 1, without
checking held first), "status" (held, and why the term ended), "release".
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import psycopg
import redis

import fencepost
from fencepost.guard import RedisGuard, SQLGuard, SQLSpec


def say(**line: Any) -> None:
    print(json.dumps(line), flush=True)


def cause(lock: fencepost.Lock) -> str:
    return "" if lock.error is None else f"{type(lock.error).__name__}: {lock.error}"


def main() -> None:
    name = os.environ["FENCEPOST_LOCK"]
    with (
        redis.Redis.from_url(os.environ["REDIS_URL"], decode_responses=True) as rdb,
        psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as db,
    ):
        cache = RedisGuard(rdb, lock=name)
        table = SQLGuard(db, SQLSpec(table="scenario", id_column="id", set_columns=["v"], lock=name))
        try:
            lock = fencepost.acquire(name, wait=60)
        except fencepost.FencepostError as e:
            say(event="error", error=str(e))
            sys.exit(1)
        with lock:
            say(event="acquired", token=str(lock.token))
            for raw in sys.stdin:
                cmd, _, arg = raw.strip().partition(" ")
                if cmd == "check":
                    say(event="checked", held=lock.held(), token=str(lock.token))
                elif cmd == "write":
                    # Deliberately no held() check here: the check came before the pause.
                    r = cache.write("scenario:value", lock.token, arg)
                    o = table.upsert(1, lock.token, arg)
                    say(
                        event="wrote", token=str(lock.token), redis=str(r.outcome), redisMark=str(r.mark),
                        sql=str(o), held=lock.held(), cause=cause(lock),
                    )  # fmt: skip
                elif cmd == "status":
                    say(event="status", held=lock.held(), cause=cause(lock))
                elif cmd == "release":
                    lock.release()
                    say(event="released", error="")


if __name__ == "__main__":
    main()
