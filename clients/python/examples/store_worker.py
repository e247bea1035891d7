"""store_worker holds a lock in Redis itself — no Kubernetes, no agent: fencepost.store — and
writes a report under the lock's fencing token through the Redis guard, in chunks, stopping the
moment the lock is lost: a worker that was paused past its TTL and replaced finds its late writes
refused by the guard.

Environment: REDIS_URL (the store, and here also the guarded data; a redlock://h1,h2,h3,h4,h5 URL
takes the lock on five masters instead), FENCEPOST_LOCK (default nightly-report).
"""

import os
import sys

import redis

import fencepost
from fencepost import store
from fencepost.guard import RedisGuard


def main() -> None:
    url = os.environ["REDIS_URL"]
    name = os.environ.get("FENCEPOST_LOCK", "nightly-report")
    try:
        lock = store.acquire(name, url, ttl=10, wait=30)  # renewed every ttl/3 while held
    except fencepost.NotAcquiredError as e:
        sys.exit(f"store_worker: not granted within 30 s: {e}")

    with (
        lock,  # released on exit; lock.ended is set the moment it is lost
        redis.Redis.from_url(url, decode_responses=True) as rdb,
    ):
        cache = RedisGuard(rdb, lock=name)  # one mark per lock
        body = f"report written under token {lock.token}"
        for part in range(3):
            if not lock.held():
                sys.exit(f"store_worker: lost the lock: {lock.error}")
            cached = cache.write(f"report:part:{part}", lock.token, body)
            if not cached.accepted:
                sys.exit(
                    f"store_worker: token {lock.token} refused: a newer holder ({cached.mark}) has written"
                )
        cached = cache.write("report:latest", lock.token, body)
        print(f"wrote {body!r} to redis ({cached.outcome})")


if __name__ == "__main__":
    main()
