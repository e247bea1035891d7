"""The guard outcome vectors (clients/conformance/guard-outcomes.json) against real servers: a
redis-server at $FENCEPOST_TEST_REDIS_URL and a PostgreSQL at $FENCEPOST_TEST_POSTGRES_URL, through
the sync and the asyncio guards. test/integration/clients/python.test.ts starts both and runs these
tests (and fails if they skip); without them they are skipped, saying so."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import redis
import redis.asyncio

import fencepost
from conftest import vectors
from fencepost.guard import (
    AsyncRedisGuard,
    AsyncSQLGuard,
    Outcome,
    RedisGuard,
    RedisResult,
    SQLGuard,
    SQLSpec,
    fence_table_sql,
)

V = vectors("guard-outcomes.json")
RUN = secrets.token_hex(4)


def server_url(env: str) -> str:
    url = os.environ.get(env, "")
    if not url:
        pytest.skip(f"{env} is not set: the guard vectors need a real server (python.test.ts sets it)")
    return url


@pytest.fixture(scope="module")
def redis_client() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(server_url("FENCEPOST_TEST_REDIS_URL"), decode_responses=True)
    yield client
    client.close()


@pytest.fixture(scope="module")
def pg_conn() -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(server_url("FENCEPOST_TEST_POSTGRES_URL"), autocommit=True) as conn:
        conn.execute(fence_table_sql())
        yield conn


def redis_step(step: dict[str, Any], call: Any) -> None:
    """redis_step checks one step's outcome and mark (a token-error is refused before sending)."""
    if step["expect"] == "token-error":
        with pytest.raises(fencepost.MalformedTokenError):
            fencepost.parse_token(step["token"])
        return
    r: RedisResult = call(fencepost.parse_token(step["token"]))
    assert (str(r.outcome), str(r.mark)) == (step["expect"], step["mark"])


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
@pytest.mark.parametrize("case", V["redis"], ids=[c["name"] for c in V["redis"]])
def test_redis_guard_vectors(redis_client: redis.Redis, case: dict[str, Any], mode: str) -> None:
    lock = f"py-conformance-{RUN}-{mode}-{secrets.token_hex(4)}"
    url = os.environ["FENCEPOST_TEST_REDIS_URL"]

    async def run_async() -> None:
        client = redis.asyncio.Redis.from_url(url, decode_responses=True)
        try:
            g = AsyncRedisGuard(client, lock=lock)
            for step in case["steps"]:
                await async_step(g, step)
        finally:
            await client.aclose()

    async def async_step(g: AsyncRedisGuard, s: dict[str, Any]) -> None:
        key = f"{lock}:{s.get('key', '')}"
        if s["op"] == "get":
            assert await g._client.get(key) == s["value"]
            return
        if s["expect"] == "token-error":
            redis_step(s, None)
            return
        t = fencepost.parse_token(s["token"])
        if s["op"] == "write":
            r = await g.write(key, t, s["value"], s.get("writeId") or None)
        elif s["op"] == "delete":
            r = await g.delete(key, t)
        else:
            r = await g.advance(t)
        assert (str(r.outcome), str(r.mark)) == (s["expect"], s["mark"])
        assert str(await g.high_water(key)) == s["mark"]

    if mode == "asyncio":
        asyncio.run(run_async())
        return
    g = RedisGuard(redis_client, lock=lock)
    for s in case["steps"]:
        key = f"{lock}:{s.get('key', '')}"
        if s["op"] == "get":
            assert redis_client.get(key) == s["value"]
            continue
        if s["op"] == "write":
            redis_step(s, lambda t, s=s, key=key: g.write(key, t, s["value"], s.get("writeId") or None))
        elif s["op"] == "delete":
            redis_step(s, lambda t, key=key: g.delete(key, t))
        else:
            redis_step(s, g.advance)
        if s["expect"] != "token-error":
            assert str(g.high_water(key)) == s["mark"]


def test_a_token_above_the_maximum_is_refused_before_anything_is_sent(redis_client: redis.Redis) -> None:
    g = RedisGuard(redis_client, lock=f"py-conformance-{RUN}-max")
    with pytest.raises(fencepost.MalformedTokenError):
        g.write("k", fencepost.MAX_TOKEN + 1, "v")
    assert redis_client.exists(g.mark_key()) == 0


EXPECT = {"accepted": Outcome.APPLIED, "stale": Outcome.STALE, "not-found": Outcome.NOT_FOUND}


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
@pytest.mark.parametrize("case", V["sql"], ids=[c["name"] for c in V["sql"]])
def test_sql_guard_vectors(pg_conn: psycopg.Connection[Any], case: dict[str, Any], mode: str) -> None:
    table = f"py_items_{RUN}_{mode}_{secrets.token_hex(4)}"
    pg_conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, v text)")
    spec = SQLSpec(table=table, id_column="id", set_columns=["v"], lock=f"py-conformance-{table}")

    def read(id: int) -> list[str] | None:
        row = pg_conn.execute(f"SELECT v FROM {table} WHERE id = %s", [id]).fetchone()
        return None if row is None else [row[0]]

    async def run_async() -> None:
        url = os.environ["FENCEPOST_TEST_POSTGRES_URL"]
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            g = AsyncSQLGuard(conn, spec)
            for s in case["steps"]:
                if s["op"] == "read":
                    assert read(s["id"]) == s["values"]
                    continue
                if s["expect"] == "token-error":
                    with pytest.raises(fencepost.MalformedTokenError):
                        fencepost.parse_token(s["token"])
                    continue
                t = fencepost.parse_token(s["token"])
                if s["op"] == "write":
                    o = await g.update(s["id"], t, *s["values"])
                elif s["op"] == "upsert":
                    o = await g.upsert(s["id"], t, *s["values"])
                elif s["op"] == "delete":
                    o = await g.delete(s["id"], t)
                else:
                    o = await g.advance(t)
                assert o is EXPECT[s["expect"]], s

    if mode == "asyncio":
        asyncio.run(run_async())
        return
    g = SQLGuard(pg_conn, spec)
    for s in case["steps"]:
        if s["op"] == "read":
            assert read(s["id"]) == s["values"]
            continue
        if s["expect"] == "token-error":
            with pytest.raises(fencepost.MalformedTokenError):
                fencepost.parse_token(s["token"])
            continue
        t = fencepost.parse_token(s["token"])
        if s["op"] == "write":
            o = g.update(s["id"], t, *s["values"])
        elif s["op"] == "upsert":
            o = g.upsert(s["id"], t, *s["values"])
        elif s["op"] == "delete":
            o = g.delete(s["id"], t)
        else:
            o = g.advance(t)
        assert o is EXPECT[s["expect"]], s
