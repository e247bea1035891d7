"""worker holds a lock through the fencepost agent beside it and writes a report under the lock's
fencing token, to Redis and to PostgreSQL, through the guards: a worker that was paused past its
lease and replaced finds its late writes refused.

Environment: FENCEPOST_LOCK (the DistributedLock), FENCEPOST_AGENT_URL (default
http://127.0.0.1:7370), REDIS_URL, DATABASE_URL.
"""

import os
import sys

import psycopg
import redis

import fencepost
from fencepost.guard import Outcome, RedisGuard, SQLGuard, SQLSpec, fence_table_sql


def main() -> None:
    try:
        lock = fencepost.acquire(os.environ["FENCEPOST_LOCK"], wait=30)
    except fencepost.NotAcquiredError as e:
        sys.exit(f"worker: not granted within 30 s: {e}")

    with (
        lock,  # released on exit; lock.ended is set the moment it is lost
        redis.Redis.from_url(os.environ["REDIS_URL"], decode_responses=True) as rdb,
        psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as db,
    ):
        cache = RedisGuard(rdb, lock=lock.name)  # one mark per lock
        db.execute(fence_table_sql())  # a migration: once
        db.execute("CREATE TABLE IF NOT EXISTS reports (id bigint PRIMARY KEY, body text)")
        reports = SQLGuard(db, SQLSpec(table="reports", id_column="id", set_columns=["body"], lock=lock.name))

        body = f"report written under token {lock.token}"
        cached = cache.write("report:latest", lock.token, body)
        if not cached.accepted:
            sys.exit(
                f"worker: redis refused token {lock.token}: a newer holder (token {cached.mark}) has written"
            )
        stored = reports.upsert(1, lock.token, body)
        if stored is Outcome.STALE:
            sys.exit(f"worker: postgres refused token {lock.token}: a newer holder has written")
        print(f"wrote {body!r} to redis ({cached.outcome}) and postgres ({stored})")


if __name__ == "__main__":
    main()
