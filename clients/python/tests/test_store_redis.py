"""The Redis lock stores against real redis-servers this module starts (one single Redis, five
Redlock masters): the keys and scripts on the wire, mutual exclusion and strictly increasing tokens
across many acquisitions by contending threads, loss when the key is deleted or taken, loss at the
end of the validity while a renew is still in flight, waiters woken by a release, Redlock with a
minority of masters down and with counters that disagree, asyncio, and the README's example.
Skipped, saying so, without a redis-server (hack/test-clients.sh requires one, so CI runs them)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import fencepost
from conftest import vectors
from fencepost import store as fs
from fencepost.store import _redis as store_redis
from fencepost.store._hold import Waiter, hold
from fencepost.store._scripts import script
from redis_servers import RedisServer, free_port, redis_servers

HERE = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def single() -> Iterator[RedisServer]:
    with redis_servers(1) as (s,):
        yield s


@pytest.fixture(scope="module")
def masters() -> Iterator[list[RedisServer]]:
    with redis_servers(5) as ms:
        yield ms


def redlock_url(ms: list[RedisServer]) -> str:
    return "redlock://" + ",".join(m.address for m in ms)


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def now_us() -> int:
    """now_us is this host's clock in microseconds: what a redis-server on loopback floors tokens at."""
    return time.time_ns() // 1000


HIGH = 10**17
"""HIGH is above the clock in microseconds (what a new lock's token starts from) until the year 5138."""


def seed_counter(server: RedisServer, keys: fs.LockKeys, value: int) -> None:
    """seed_counter sets the lock's counter on ``server`` as if that Redis master had issued token
    ``value``: the epoch key holds its replication ID, so the next grant there is ``value`` + 1, not
    floored at the clock."""
    with server.client() as r:
        r.set(keys.counter, str(value))
        r.set(keys.epoch, repl_id(r))


def repl_id(r: redis.Redis) -> str:
    """repl_id is the server's INFO replication master_replid: what the acquire scripts record in a
    lock's epoch key."""
    return str(r.info("replication")["master_replid"])


def contend(url: str, lock: str, workers: int, rounds: int, ttl: float = 2.0) -> list[int]:
    """contend runs ``workers`` threads, each acquiring ``lock`` ``rounds`` times through one shared
    store; inside, an unsynchronised counter checks that nobody else is inside. Returns the tokens
    in the order the holders went in."""
    tokens: list[int] = []
    inside = [0]
    overlaps = [0]
    errors: list[BaseException] = []
    with fs.connect(url) as st:

        def work() -> None:
            try:
                for _ in range(rounds):
                    with st.acquire(lock, ttl=ttl, wait=30) as held:
                        inside[0] += 1
                        if inside[0] != 1:
                            overlaps[0] += 1
                        tokens.append(held.token)
                        time.sleep(0.001)
                        assert held.held()
                        inside[0] -= 1
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert not errors, errors
    assert overlaps[0] == 0
    assert len(tokens) == workers * rounds
    return tokens


# --- one Redis ------------------------------------------------------------------------------------


def test_a_grant_sets_the_holder_key_with_the_ttl_and_advances_the_counter(single: RedisServer) -> None:
    name = unique("keys")
    keys = fs.lock_keys("team-a", name)
    before = now_us()
    with single.client() as r, fs.acquire(name, single.url, namespace="team-a", ttl=5) as lock:
        # A new lock: its first token is the Redis server's clock in µs (this host's, on loopback).
        assert isinstance(lock.token, int) and before < lock.token <= now_us() + 1
        assert lock.counter_missing and lock.clock_floored
        owner = r.get(keys.holder)
        assert owner is not None and len(owner) == 32
        assert 4000 < r.pttl(keys.holder) <= 5000
        assert r.get(keys.counter) == str(lock.token) and r.pttl(keys.counter) == -1
        assert keys.epoch == f"fencepost:epoch:{{{keys.counter}}}"
        assert r.get(keys.epoch) == repl_id(r)
        assert lock.held() and lock.error is None and not lock.ended.is_set()
    assert isinstance(lock.error, fencepost.LockReleasedError) and not lock.held()
    with single.client() as r:
        assert r.exists(keys.holder) == 0
        assert r.get(keys.counter) == str(lock.token)  # the counter is never deleted
    with fs.acquire(name, single.url, namespace="team-a") as again:
        assert again.token == lock.token + 1 and not again.counter_missing and not again.clock_floored


@pytest.mark.parametrize("kind", ["redis", "redlock"])
def test_a_lost_counter_or_another_redis_process_floors_the_next_token_at_the_clock(
    kind: str, single: RedisServer, masters: list[RedisServer]
) -> None:
    servers = [single] if kind == "redis" else masters
    url = single.url if kind == "redis" else redlock_url(masters)
    name = unique("flushed")
    keys = fs.lock_keys("default", name)

    def grant() -> fs.StoreLock:
        with fs.acquire(name, url, ttl=2) as lock:
            return lock

    first = grant()
    assert first.counter_missing and first.clock_floored
    # Redlock too: the first grant raised the majority to one token, so they agree again.
    second = grant()
    assert (second.token, second.counter_missing, second.clock_floored) == (first.token + 1, False, False)
    # The store lost its data: without the floor, the token would start again from 1.
    for s in servers:
        with s.client() as r:
            r.flushall()
    flushed = grant()
    assert flushed.token > second.token and flushed.counter_missing and flushed.clock_floored
    # Another Redis process issued the last token (a failover, a restart): the counter is there,
    # but may be behind; floored at the clock again.
    for s in servers:
        with s.client() as r:
            r.set(keys.epoch, "another-process")
    moved = grant()
    assert moved.token > flushed.token and not moved.counter_missing and moved.clock_floored
    after = grant()
    assert (after.token, after.clock_floored) == (moved.token + 1, False)


def test_owner_ids_name_the_pod_and_a_release_publishes_the_owner_id(
    single: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = unique("owner")
    keys = fs.lock_keys("default", name)
    monkeypatch.setenv("POD_NAME", "worker-0")
    monkeypatch.setenv("POD_UID", "0c1d2e3f")
    with single.client() as r, r.pubsub() as ps:
        ps.subscribe(keys.channel)
        assert ps.get_message(timeout=2) is not None  # the confirmation
        with fs.acquire(name, single.url) as lock:
            owner = r.get(keys.holder)
            assert owner is not None and fs.pod_of_owner(owner) == fs.Pod("worker-0", "0c1d2e3f")
        m = ps.get_message(timeout=2)
        assert m is not None and m["type"] == "message" and m["data"] == owner
        with fs.acquire(name, single.url, pod=fs.Pod("web-1", "abc")):
            assert fs.pod_of_owner(r.get(keys.holder) or "") == fs.Pod("web-1", "abc")
    assert lock.token >= 1


def test_many_acquisitions_by_contending_threads_exclude_each_other_with_strictly_increasing_tokens(
    single: RedisServer,
) -> None:
    tokens = contend(single.url, unique("mutex"), workers=6, rounds=40)
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
    # One Redis: the first grant floors at the clock, then every grant advances the counter by one.
    assert tokens == list(range(tokens[0], tokens[0] + 240))


def test_the_lock_is_lost_at_once_when_its_key_is_deleted(single: RedisServer) -> None:
    name = unique("deleted")
    lock = fs.acquire(name, single.url, ttl=0.9)
    try:
        with single.client() as r:
            r.delete(fs.lock_keys("default", name).holder)
        assert lock.wait(0.3 + 0.5), "not lost at the next renew (every 300 ms)"
        assert isinstance(lock.error, fencepost.LockLostError)
        assert "gone or held by another owner" in str(lock.error)
        assert not lock.held()
    finally:
        lock.release()
    assert isinstance(lock.error, fencepost.LockLostError)  # a release after a loss keeps the loss


def test_the_lock_is_lost_when_another_owner_took_its_key(single: RedisServer) -> None:
    name = unique("taken")
    holder = fs.lock_keys("default", name).holder
    with fs.acquire(name, single.url, ttl=0.9) as lock:
        with single.client() as r:
            r.set(holder, "someone-else", px=60_000)
        assert lock.wait(0.8)
        assert isinstance(lock.error, fencepost.LockLostError)
    with single.client() as r:
        assert r.get(holder) == "someone-else"  # the release compared the owner and left it


def test_the_lock_is_lost_at_the_end_of_its_validity_while_a_renew_hangs(single: RedisServer) -> None:
    name = unique("paused")
    with fs.connect(single.url) as st:
        lock = st.acquire(name, ttl=0.6)
        started = time.monotonic()
        single.pause()  # answers nothing: the renew at 200 ms hangs for its 2 s socket timeout
        try:
            assert lock.wait(3)
            lost_after = time.monotonic() - started
        finally:
            single.resume()
        assert isinstance(lock.error, fencepost.LockLostError)
        # The validity ends 592 ms after the send; the hanging renew fails only at 2.2 s.
        assert lost_after < 1.5, lost_after
        assert "validity passed" in str(lock.error)
        lock.release()


def test_a_waiter_is_woken_by_the_release_not_by_its_backoff(single: RedisServer) -> None:
    name = unique("wake")
    with fs.connect(single.url) as st:
        holder = st.acquire(name, ttl=10)
        got: list[tuple[float, fs.StoreLock]] = []

        def wait_for_it() -> None:
            # The largest jitter: the backoff alone would retry at 50, 150, 350, 750 ms...
            lk = hold(
                st.backend("default", name),
                name=name,
                namespace="default",
                ttl_ms=10_000,
                wait=10,
                if_held="wait",
                floor=lambda: 0,
                clock=st._clock,
                random=lambda: 1 - 2**-53,
            )
            got.append((time.monotonic(), lk))

        t = threading.Thread(target=wait_for_it)
        t.start()
        time.sleep(0.4)
        released_at = time.monotonic()
        holder.release()
        t.join(5)
        ((at, lk),) = got
        with lk:
            assert lk.token == holder.token + 1
        # ...the next at 750 ms from the start, 350 ms after the release; the publish wakes it now.
        assert at - released_at < 0.15, at - released_at


def test_a_release_channel_stays_subscribed_a_while_then_is_unsubscribed(
    single: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_redis, "CHANNEL_IDLE", 0.5)
    name = unique("idle")
    channel = fs.lock_keys("default", name).channel
    with single.client() as r, fs.connect(single.url) as st:

        def subscribers() -> int:
            ((_, n),) = r.pubsub_numsub(channel)
            return int(n)

        def contended() -> None:
            # A free lock costs one attempt and no SUBSCRIBE; a waiter subscribes after its first
            # refusal, and gets the lock when the holder releases it.
            holder = st.acquire(name, ttl=2)
            assert subscribers() == 0
            tokens: list[int] = []

            def wait_for_it() -> None:
                with st.acquire(name, ttl=2, wait=5) as lk:
                    tokens.append(lk.token)

            t = threading.Thread(target=wait_for_it)
            t.start()
            until(lambda: subscribers() == 1)
            holder.release()
            t.join(5)
            assert tokens == [holder.token + 1]

        contended()
        assert subscribers() == 1  # kept for the next acquire of the same lock
        until(lambda: subscribers() == 0, 3.0)
        contended()  # subscribes again


def test_if_held_fail_and_a_bounded_wait(single: RedisServer) -> None:
    name = unique("busy")
    with fs.acquire(name, single.url, ttl=5):
        with pytest.raises(fs.StoreLockHeldError, match="held by another owner"):
            fs.acquire(name, single.url, if_held="fail")
        started = time.monotonic()
        with pytest.raises(
            fencepost.NotAcquiredError, match=r"not granted within 0.4 s \(held by another owner"
        ):
            fs.acquire(name, single.url, wait=0.4)
        assert 0.4 <= time.monotonic() - started < 2.0
        with pytest.raises(fencepost.NotAcquiredError):
            fs.acquire(name, single.url, wait=0)


def test_a_floor_lifts_the_token(single: RedisServer) -> None:
    name = unique("floor")
    with fs.acquire(name, single.url, floor=lambda lock: HIGH if lock == name else 0) as lock:
        assert lock.token == HIGH + 1
    with fs.acquire(name, single.url, floor=10) as lock:
        assert lock.token == HIGH + 2


def test_a_store_that_is_down_is_retried_until_the_wait_ends(single: RedisServer) -> None:
    port = free_port()  # nothing listens there
    started = time.monotonic()
    with pytest.raises(fencepost.NotAcquiredError, match="ConnectionError"):
        fs.acquire("down", f"redis://127.0.0.1:{port}", wait=0.5)
    assert time.monotonic() - started < 1.5


def test_bad_arguments_are_refused_before_anything_is_sent(single: RedisServer) -> None:
    with pytest.raises(ValueError, match=r'lock name must be a DNS label.*"Billing"'):
        fs.acquire("Billing", single.url)
    with pytest.raises(ValueError, match="ttl"):
        fs.acquire("billing", single.url, ttl=0.1)
    with pytest.raises(fs.StoreUrlError, match="scheme http://"):
        fs.acquire("billing", "http://127.0.0.1")
    with pytest.raises(ValueError, match="wait"):
        fs.acquire("billing", single.url, wait=-1)


def test_closing_the_store_ends_its_locks_and_frees_their_keys(single: RedisServer) -> None:
    name = unique("closed")
    st = fs.connect(single.url)
    lock = st.acquire(name, ttl=5)
    st.close()
    assert isinstance(lock.error, fencepost.LockLostError) and "closed" in str(lock.error)
    with single.client() as r:
        assert r.exists(fs.lock_keys("default", name).holder) == 0


def test_asyncio_async_with_and_a_cancelled_wait(single: RedisServer) -> None:
    name = unique("aio")

    async def main() -> None:
        async with fs.acquire_async(name, single.url, ttl=2) as lock:
            assert lock.held()
            waiting = asyncio.ensure_future(fs.acquire_async(name, single.url))
            await asyncio.sleep(0.2)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            ended = asyncio.ensure_future(lock.wait_async())
            await asyncio.sleep(0)
            assert not ended.done()
        await asyncio.wait_for(ended, 1)
        assert isinstance(lock.error, fencepost.LockReleasedError)

    asyncio.run(main())


def test_the_readme_store_example_runs(single: RedisServer) -> None:
    env = {**os.environ, "REDIS_URL": single.url, "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run(
        [sys.executable, str(HERE / "examples/store_worker.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "wrote 'report written under token" in r.stdout and "(applied)" in r.stdout


def test_the_contention_worker_speaks_the_protocol(single: RedisServer, masters: list[RedisServer]) -> None:
    # test/support/store-contention.ts runs it against the Node worker; here alone, on both stores.
    for url in (single.url, redlock_url(masters)):
        lock = unique("proto")
        flags = {"--store": url, "--lock": lock, "--namespace": "proto", "--ttl-ms": "1000"}
        flags |= {"--guard": single.url, "--rounds": "3", "--hold-ms": "5"}
        r = subprocess.run(
            [
                sys.executable,
                str(HERE / "tests/store_contention_worker.py"),
                *(x for kv in flags.items() for x in kv),
            ],
            input="start\n",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        lines = [json.loads(line) for line in r.stdout.splitlines()]
        assert all(e["worker"] == "python" for e in lines)
        assert [e["event"] for e in lines] == ["ready"] + ["acquired", "write", "released"] * 3 + ["done"]
        tokens = [e["token"] for e in lines if e["event"] == "acquired"]
        assert [int(t) for t in tokens] == sorted(int(t) for t in tokens) and len(set(tokens)) == 3
        assert {e["outcome"] for e in lines if e["event"] == "write"} == {"applied"}
        with single.client() as g:
            assert g.get(f"{lock}:data") == tokens[-1] and g.get(f"{lock}:inside") == "0"


# --- Redlock --------------------------------------------------------------------------------------


def test_redlock_grants_on_every_master_and_contending_threads_get_strictly_increasing_tokens(
    masters: list[RedisServer],
) -> None:
    name = unique("redlock")
    tokens = contend(redlock_url(masters), name, workers=5, rounds=30)
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
    keys = fs.lock_keys("default", name)
    counters = []
    for m in masters:
        with m.client() as r:
            counters.append(int(r.get(keys.counter) or 0))
            assert r.exists(keys.holder) == 0
    assert max(counters) == tokens[-1]


def test_redlock_holds_with_two_of_five_masters_down_and_not_with_three(masters: list[RedisServer]) -> None:
    name = unique("minority")
    url = redlock_url(masters)
    masters[3].stop()
    masters[4].stop()
    try:
        with fs.acquire(name, url, ttl=1.5, wait=5) as lock:
            time.sleep(1.6)  # three renews on the three masters left
            assert lock.held()
        masters[2].stop()
        with pytest.raises(fencepost.NotAcquiredError, match="2 of 5 masters granted, 3 needed"):
            fs.acquire(name, url, wait=0.5)
    finally:
        for m in masters[2:]:
            m.start()


def test_redlock_is_lost_when_a_majority_says_not_the_owner(masters: list[RedisServer]) -> None:
    name = unique("redlock-lost")
    holder = fs.lock_keys("default", name).holder
    with fs.acquire(name, redlock_url(masters), ttl=0.9) as lock:
        for m in masters[:3]:
            with m.client() as r:
                r.delete(holder)
        assert lock.wait(0.8)
        assert "gone or held by another owner" in str(lock.error)


def test_redlock_raises_the_token_to_the_majoritys_largest_counter(masters: list[RedisServer]) -> None:
    name = unique("raise")
    keys = fs.lock_keys("default", name)
    counter = keys.counter
    # One master far ahead: the others floor the new counter at their clocks (so on a new lock the
    # masters disagree by microseconds anyway), master 0 answers HIGH + 1.
    seed_counter(masters[0], keys, HIGH)
    with fs.acquire(name, redlock_url(masters)) as lock:
        assert lock.token == HIGH + 1
        assert not lock.counter_missing and lock.clock_floored
        values = []
        for m in masters:
            with m.client() as r:
                values.append(r.get(counter))
        assert values == [str(HIGH + 1)] * 5  # raised on every master that granted
    with fs.acquire(name, redlock_url(masters)) as lock:
        assert lock.token == HIGH + 2 and not lock.clock_floored


def test_redlock_wakes_waiters_on_release(masters: list[RedisServer]) -> None:
    name = unique("redlock-wake")
    with fs.connect(redlock_url(masters)) as st:
        holder = st.acquire(name, ttl=10)
        got: list[float] = []

        def wait_for_it() -> None:
            with hold(
                st.backend("default", name),
                name=name,
                namespace="default",
                ttl_ms=10_000,
                wait=10,
                if_held="wait",
                floor=lambda: 0,
                clock=st._clock,
                random=lambda: 1 - 2**-53,
                waiter=Waiter(),
            ):
                got.append(time.monotonic())

        t = threading.Thread(target=wait_for_it)
        t.start()
        time.sleep(0.8)  # the backoff's next attempt: 1550 ms from the start
        released_at = time.monotonic()
        holder.release()
        t.join(5)
        assert got and got[0] - released_at < 0.5, got[0] - released_at


def test_redlock_waiters_are_not_woken_by_give_backs_only_by_the_holders_release(
    masters: list[RedisServer],
) -> None:
    # Another owner holds the key on masters 0-2 (a majority of 5). Two waiters take turns at
    # masters 3 and 4: each failed attempt gives them back with a release that publishes its own
    # owner id on those two masters — its own, and not a majority's, so it wakes neither waiter
    # (store.json "timing.waiting"). Only the holder's release, published on three masters, does.
    name = unique("redlock-storm")
    keys = fs.lock_keys("default", name)
    for m in masters[:3]:
        with m.client() as r:
            r.set(keys.holder, "someone-else", px=20_000)
    attempts = [0]
    got: list[float] = []
    with fs.connect(redlock_url(masters)) as st:

        def counted() -> str:
            attempts[0] += 1
            return fs.new_owner_id()

        def wait_for_it() -> None:
            with hold(
                st.backend("default", name),
                name=name,
                namespace="default",
                ttl_ms=5_000,
                wait=10,
                if_held="wait",
                floor=lambda: 0,
                clock=st._clock,
                random=lambda: 1 - 2**-53,  # the backoff alone: 50, 100, 200, 400, 800, 1600 ms
                new_owner=counted,
            ):
                got.append(time.monotonic())

        threads = [threading.Thread(target=wait_for_it) for _ in range(2)]
        started = time.monotonic()
        for t in threads:
            t.start()
        time.sleep(2.0)
        waited, before = time.monotonic() - started, attempts[0]
        assert not got
        released_at = time.monotonic()
        for m in masters[:3]:  # the holder's release: compare-and-DEL and publish, on its majority
            with m.client() as r:
                assert r.eval(fs_release_lua(), 1, keys.holder, "someone-else", keys.channel) == 1
        for t in threads:
            t.join(10)
    # About 7 each (the first, one after subscribing, five on the backoff). Woken by each other's
    # (and their own) give-backs, they made over a thousand: 1,029-1,581 in two seconds.
    assert before <= 30, f"{before} attempts in {waited:.2f} s against a held lock"
    # The holder's release wakes a waiter at once: the backoff's next retry was 1.15 s away or more.
    assert len(got) == 2 and got[0] - released_at < 0.8, (got, released_at)


def fs_release_lua() -> str:
    """fs_release_lua is the release script every client sends (store-release.lua)."""
    return script("release").source


def _at(failover: str | None) -> str:
    """What a failover count (Sentinel's config-epoch) adds to the recorded epoch: "@" and it, or nothing."""
    return "@" + failover if failover else ""


@pytest.mark.parametrize("case", vectors("store.json")["epochVectors"], ids=lambda c: str(c["name"]))
def test_the_epoch_vectors_on_a_real_redis(case: dict[str, Any], single: RedisServer) -> None:
    """store.json's epochVectors: the acquire script's token after an epoch change (the counter's
    jump, the clock floor, the 2^63-1 bound)."""
    keys = fs.lock_keys("default", "vector")
    with single.client() as r:
        r.delete(keys.holder, keys.counter, keys.epoch)
        rid = repl_id(r)
        if case["counter"] is not None:
            r.set(keys.counter, case["counter"])
        if case["epoch"] is not None:
            recorded = rid if case["epoch"] == "same" else "another-replication-id"
            r.set(keys.epoch, recorded + _at(case.get("recordedFailover")))
        sec, us = r.time()
        clock = sec * 1_000_000 + us
        args = [keys.holder, keys.counter, keys.epoch, "o", "1000", case["floor"]]
        if "failover" in case:
            args.append(case["failover"])
        if case.get("error"):
            with pytest.raises(redis.ResponseError, match="overflow"):
                r.eval(script("acquire").source, 3, *args)
            assert r.exists(keys.holder) == 0
            return
        answer = r.eval(script("acquire").source, 3, *args)
        token = int(answer[1])
        if case["token"] == "clock":
            assert token > clock
        else:
            assert str(token) == case["token"]
        assert answer[5] == case["epochChanged"]
        assert r.get(keys.epoch) == rid + _at(case.get("failover"))
