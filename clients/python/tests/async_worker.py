"""async_worker is the asyncio side of the client against a real agent, for
test/integration/clients/python.test.ts: it takes FENCEPOST_LOCK with ``async with
acquire_async`` and the run id RUN_ID, writes under its token through the asyncio guards (Redis
key async:value, table async_scenario row 1), reads a renewal from the event stream (``async for``),
reports the run completed and releases; then asks for the same run id again, which must be
refused as already done. It prints one JSON line."""

from __future__ import annotations

import asyncio
import json
import os

import psycopg
import redis.asyncio

import fencepost
from fencepost.guard import AsyncRedisGuard, AsyncSQLGuard, SQLSpec, fence_table_sql


async def first_renewal(lock: fencepost.Lock) -> fencepost.Event:
    async for event in lock.aevents():
        if event.type == "renewed":
            return event
    raise AssertionError("the event stream ended without a renewal")


async def main() -> None:
    name, run_id = os.environ["FENCEPOST_LOCK"], os.environ["RUN_ID"]
    async with (
        redis.asyncio.Redis.from_url(os.environ["REDIS_URL"], decode_responses=True) as rdb,
        await psycopg.AsyncConnection.connect(os.environ["DATABASE_URL"], autocommit=True) as db,
    ):
        await db.execute(fence_table_sql())
        await db.execute("CREATE TABLE IF NOT EXISTS async_scenario (id bigint PRIMARY KEY, v text)")
        async with fencepost.acquire_async(name, wait=30, run_id=run_id) as lock:
            body = f"async under token {lock.token}"
            cached = await AsyncRedisGuard(rdb, lock=name).write("async:value", lock.token, body)
            spec = SQLSpec(table="async_scenario", id_column="id", set_columns=["v"], lock=name)
            stored = await AsyncSQLGuard(db, spec).upsert(1, lock.token, body)
            renewed = await asyncio.wait_for(first_renewal(lock), 15)
            await lock.complete_async()
            held = lock.held()
        try:
            async with fencepost.acquire_async(name, wait=5, run_id=run_id):
                again = "acquired"
        except fencepost.AlreadyDoneError:  # the agent's 409 already-done, an AlreadyDoneProblem
            again = "AlreadyDoneError"
    print(
        json.dumps(
            {
                "token": str(lock.token),
                "body": body,
                "redis": str(cached.outcome),
                "sql": str(stored),
                "renewedToken": str(renewed.token),
                "heldBeforeRelease": held,
                "error": type(lock.error).__name__,
                "again": again,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
