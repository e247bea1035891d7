"""store_contention_worker: the Python side of the cross-language contention
test: a Python and a Node worker (test/support/store-contention.ts) on the same store lock must
never both hold it, whichever language wrote the lock.

    python store_contention_worker.py --store URL --lock NAME --namespace NS --ttl-ms N
        --guard REDIS_URL --rounds N --hold-ms N

Once connected it prints {"event":"ready"} and waits for a line on stdin: the harness starts
both workers' rounds together, so that they contend from the first round however long each took
to start. Each round: acquire the store lock (waiting up to 20 s) -> {"event":"acquired","token":"..."};
INCR "<lock>:inside" on the guard Redis ({"event":"overlap"} unless the answer is 1); a fenced
write of the token to "<lock>:data" through fencepost.guard.RedisGuard (lock-scoped mark of
<lock>) -> {"event":"write","token":"...","outcome":"applied"|"stale"|"duplicate"}; sleep
hold-ms; DECR "<lock>:inside"; release -> {"event":"released","token":"..."}. Then
{"event":"done"} and exit 0; on an error {"event":"error","message":"..."} and exit 1. One JSON
object per line, flushed; every line has "worker":"python".
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import redis

from fencepost import store
from fencepost.guard import RedisGuard


def out(event: str, **fields: str) -> None:
    print(json.dumps({"worker": "python", "event": event, **fields}), flush=True)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="store_contention_worker")
    p.add_argument("--store", required=True)
    p.add_argument("--lock", required=True)
    p.add_argument("--namespace", default="default")
    p.add_argument("--ttl-ms", type=int, default=15_000)
    p.add_argument("--guard", required=True)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--hold-ms", type=int, default=0)
    try:
        a = p.parse_args(argv)
    except SystemExit as e:  # a usage error: argparse printed it to stderr
        if e.code in (0, None):
            raise
        out("error", message=f"bad arguments: {' '.join(argv)}")
        return 1
    try:
        with (
            redis.Redis.from_url(a.guard, decode_responses=True) as g,
            store.connect(a.store) as st,
        ):
            guard = RedisGuard(g, lock=a.lock)
            g.ping()
            out("ready")
            if sys.stdin.readline() == "":
                raise EOFError("stdin closed before the start line")
            inside = f"{a.lock}:inside"
            for _ in range(a.rounds):
                lock = st.acquire(a.lock, namespace=a.namespace, ttl=a.ttl_ms / 1000, wait=20)
                token = str(lock.token)
                try:
                    out("acquired", token=token)
                    if g.incr(inside) != 1:
                        out("overlap", token=token)
                    r = guard.write(f"{a.lock}:data", lock.token, token)
                    out("write", token=token, outcome=r.outcome.value)
                    time.sleep(a.hold_ms / 1000)
                    g.decr(inside)
                finally:
                    lock.release()
                out("released", token=token)
        out("done")
        return 0
    except Exception as e:
        out("error", message=f"{type(e).__name__}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
