"""The lock against a fake agent: canned answers of the agent's lock API for one lock, to test the
client's own logic. The real agent is test/integration/clients/python.test.ts."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

import fencepost
from fencepost import _lock
from fencepost._http import Agent

Answer = tuple[int, str]

HELD_MAX = (
    '{"lock":"billing","held":true,"token":"9223372036854775807","holder":"p",'
    '"expiresInMs":%d,"state":"held"}'
)


def held_for(ms: int) -> Callable[[], Answer]:
    return lambda: (200, HELD_MAX % ms)


def granted(ms: int) -> Callable[[str], Answer]:
    return lambda query: (200, HELD_MAX % ms)


def problem(name: str, status: int, **extra: Any) -> str:
    return json.dumps(
        {
            "type": f"https://fencepost.io/problems/{name}",
            "title": "t",
            "status": status,
            "detail": "d",
            "lock": "billing",
            **extra,
        }
    )


CLOSE = "close"
"""CLOSE, put among the frames, ends the stream's connection (the client must reconnect)."""


class FakeAgent:
    """FakeAgent answers POST acquire/release/complete, GET state and the SSE stream of lock billing."""

    def __init__(self) -> None:
        self.acquire: Callable[[str], Answer] = granted(5000)
        self.state: Callable[[], Answer] = held_for(5000)
        self.complete: Callable[[str], Answer] = lambda q: (200, HELD_MAX % 5000)
        self.events: queue.Queue[str] = queue.Queue()
        self.released = 0
        self.queries: list[str] = []
        self.last_event_ids: list[str | None] = []  # the Last-Event-ID of each stream request
        self.stop = threading.Event()
        agent = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def answer(self, a: Answer) -> None:
                status, body = a
                self.send_response(status)
                ctype = "application/json" if status == 200 else "application/problem+json"
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body.encode())))
                self.end_headers()
                self.wfile.write(body.encode())

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                if path == "/v1/locks/billing":
                    self.answer(agent.state())
                elif path == "/v1/locks/billing/events":
                    agent.last_event_ids.append(self.headers.get("Last-Event-ID"))
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    self.wfile.write(b"retry: 1000\n\n")
                    self.wfile.flush()
                    while not agent.stop.is_set():
                        try:
                            frame = agent.events.get(timeout=0.05)
                        except queue.Empty:
                            continue
                        if frame == CLOSE:
                            break
                        try:
                            self.wfile.write(frame.encode())
                            self.wfile.flush()
                        except OSError:
                            return
                    self.close_connection = True
                else:
                    self.answer((404, problem("no-route", 404)))

            def do_POST(self) -> None:
                u = urlsplit(self.path)
                # As the real agent: a POST without Content-Type: application/json and {} is 415.
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Type") != "application/json" or body != b"{}":
                    self.answer((415, problem("json-body-required", 415)))
                    return
                agent.queries.append(f"{u.path}?{u.query}")
                if u.path == "/v1/locks/billing/acquire":
                    self.answer(agent.acquire(u.query))
                elif u.path == "/v1/locks/billing/release":
                    agent.released += 1
                    self.answer((200, '{"lock":"billing","held":false,"state":"released"}'))
                elif u.path == "/v1/locks/billing/complete":
                    self.answer(agent.complete(u.query))
                else:
                    self.answer((404, problem("no-route", 404)))

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that cut its request (a cancelled wait, a release)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def agent() -> Iterator[FakeAgent]:
    f = FakeAgent()
    yield f
    f.close()


def within(seconds: float, what: str, cond: Callable[[], bool]) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.01)


def test_acquire_holds_with_the_exact_token_and_releases_once(agent: FakeAgent) -> None:
    with fencepost.acquire("billing", base_url=agent.url) as lock:
        assert lock.token == fencepost.MAX_TOKEN == 9223372036854775807
        assert type(lock.token) is int
        assert lock.held() and lock.error is None
    assert not lock.held()
    assert isinstance(lock.error, fencepost.LockReleasedError)
    assert agent.released == 1
    lock.release()  # idempotent
    assert agent.released == 1
    assert list(lock.events()) == []  # ended with the term


def test_held_ends_when_the_term_runs_out_without_a_fresh_read(agent: FakeAgent) -> None:
    agent.acquire, agent.state = granted(400), held_for(400)
    with fencepost.acquire("billing", base_url=agent.url) as lock:
        start = time.monotonic()

        # The agent stops answering (cut off, paused): no read extends the term.
        def hang() -> Answer:
            time.sleep(2)
            return (503, "")

        agent.state = hang
        assert lock.wait(5), "the term did not end"
        took = time.monotonic() - start
        assert isinstance(lock.error, fencepost.LockLostError)
        assert not lock.held()
        assert took < 0.4 + 0.3, f"ended {took:.3f} s after the last read; the term was 0.4 s"


def test_fresh_reads_extend_the_term(agent: FakeAgent) -> None:
    agent.acquire, agent.state = granted(400), held_for(400)
    with fencepost.acquire("billing", base_url=agent.url) as lock:
        time.sleep(1.2)  # three terms: the refresher's reads (every 0.2 s) renew it
        assert lock.held(), lock.error


def test_a_wall_clock_jump_ends_the_term_at_the_next_check(
    agent: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A VM pause: the monotonic clock stood still while the wall clock ran 10 minutes on.
    agent.acquire, agent.state = granted(60_000), held_for(60_000)
    with fencepost.acquire("billing", base_url=agent.url) as lock:
        assert lock.held()
        real_wall = time.time
        monkeypatch.setattr(_lock, "_wall", lambda: real_wall() + 600)
        assert not lock.held()
        assert isinstance(lock.error, fencepost.LockLostError)


def test_a_lost_event_ends_the_term(agent: FakeAgent) -> None:
    agent.acquire, agent.state = granted(60_000), held_for(60_000)
    with fencepost.acquire("billing", base_url=agent.url) as lock:
        head = '"lock":"billing","token":"9223372036854775807"'
        agent.events.put(
            f'event: renewed\nid: a-1\ndata: {{"type":"renewed",{head},"expiresInMs":60000}}\n\n'
        )
        agent.events.put(f'event: lost\nid: a-2\ndata: {{"type":"lost",{head},"reason":"granted to q"}}\n\n')
        assert lock.wait(5), "not ended within 5 s of the lost event"
        assert isinstance(lock.error, fencepost.LockLostError)
        assert "granted to q" in str(lock.error)
        assert not lock.held()
        assert [e.type for e in lock.events()] == ["renewed", "lost"]


def test_the_stream_reconnects_with_the_last_event_id(agent: FakeAgent) -> None:
    agent.acquire, agent.state = granted(60_000), held_for(60_000)
    with fencepost.acquire("billing", base_url=agent.url) as lock:
        head = '"lock":"billing","token":"9223372036854775807"'
        agent.events.put(
            f'event: renewed\nid: a-7\ndata: {{"type":"renewed",{head},"expiresInMs":60000}}\n\n'
        )
        agent.events.put(CLOSE)
        within(5, "a second stream request", lambda: len(agent.last_event_ids) >= 2)
        assert agent.last_event_ids[:2] == [None, "a-7"]
        assert lock.held()


def test_aevents_iterates_the_stream_until_the_term_ends(agent: FakeAgent) -> None:
    agent.acquire, agent.state = granted(60_000), held_for(60_000)

    async def main() -> list[str]:
        async with fencepost.acquire_async("billing", base_url=agent.url) as lock:
            head = '"lock":"billing","token":"9223372036854775807"'
            agent.events.put(f'event: draining\nid: a-1\ndata: {{"type":"draining",{head},"to":"q"}}\n\n')
            agent.events.put(f'event: lost\nid: a-2\ndata: {{"type":"lost",{head},"reason":"revoked"}}\n\n')
            return [e.type async for e in lock.aevents()]

    assert asyncio.run(asyncio.wait_for(main(), 10)) == ["draining", "lost"]


def test_a_grant_that_is_already_over_is_not_returned(agent: FakeAgent) -> None:
    agent.state = lambda: (
        200,
        '{"lock":"billing","held":false,"token":"9223372036854775807","state":"lost"}',
    )
    with pytest.raises(fencepost.LockLostError):
        fencepost.acquire("billing", base_url=agent.url)
    assert agent.released == 1  # what the grant left is withdrawn


def test_not_granted_in_time_withdraws_the_request(agent: FakeAgent) -> None:
    def not_granted(query: str) -> Answer:
        ms = int(dict(p.split("=") for p in query.split("&"))["wait"].removesuffix("ms"))
        time.sleep(ms / 1000)
        return 423, problem(
            "not-granted", 423, snapshot={"lock": "billing", "held": False, "state": "waiting"}
        )

    agent.acquire = not_granted
    start = time.monotonic()
    with pytest.raises(fencepost.NotAcquiredError):
        fencepost.acquire("billing", base_url=agent.url, wait=0.3)
    took = time.monotonic() - start
    assert 0.25 < took < 2, f"gave up after {took:.3f} s for a 0.3 s wait"
    assert agent.released == 1


@pytest.mark.parametrize(
    ("status", "body", "kwargs", "error", "query"),
    [
        pytest.param(
            409,
            problem("already-done", 409, runId="r1"),
            {"run_id": "r1"},
            fencepost.AlreadyDoneError,
            "runId=r1&wait=30000ms",
            id="already done",
        ),
        pytest.param(
            423,
            problem("held", 423, holder="q", snapshot={"lock": "billing", "held": False, "state": "waiting"}),
            {"if_held": "fail"},
            fencepost.NotAcquiredError,
            "ifHeld=fail&wait=30000ms",
            id="held elsewhere",
        ),
    ],
)
def test_already_done_and_held_elsewhere_are_typed_and_leave_nothing_to_withdraw(
    agent: FakeAgent, status: int, body: str, kwargs: dict[str, Any], error: type[Exception], query: str
) -> None:
    agent.acquire = lambda q: (status, body)
    with pytest.raises(error) as raised:
        fencepost.acquire("billing", base_url=agent.url, **kwargs)
    assert isinstance(raised.value, fencepost.ProblemError)
    if isinstance(raised.value, fencepost.LockHeldProblem):
        assert raised.value.holder == "q"
    assert agent.released == 0
    assert agent.queries == [f"/v1/locks/billing/acquire?{query}"]


def test_an_answer_that_is_not_problem_details_is_raised_and_the_request_withdrawn(agent: FakeAgent) -> None:
    agent.acquire = lambda q: (502, "upstream connect error")
    with pytest.raises(fencepost.FencepostError, match="HTTP 502") as raised:
        fencepost.acquire("billing", base_url=agent.url, wait=5)
    assert not isinstance(raised.value, fencepost.ProblemError)
    assert agent.released == 1  # the request may have been queued before the proxy failed


def test_complete_names_the_run_and_the_token(agent: FakeAgent) -> None:
    agent.acquire, agent.state = granted(60_000), held_for(60_000)
    agent.complete = lambda q: (
        409,
        problem("not-held", 409, snapshot={"lock": "billing", "held": False, "state": "lost"}),
    )
    with (
        fencepost.acquire("billing", base_url=agent.url, run_id="2026-01-01") as lock,
        pytest.raises(fencepost.LockLostError),
    ):
        lock.complete()
    assert "/v1/locks/billing/complete?runId=2026-01-01&token=9223372036854775807" in agent.queries


def test_an_acquire_that_asked_nothing_withdraws_nothing(agent: FakeAgent) -> None:
    abort = threading.Event()
    abort.set()
    with pytest.raises(fencepost.NotAcquiredError):
        _lock._acquire(Agent("billing", agent.url), wait=None, run_id=None, if_held=None, abort=abort)
    # Another process of the pod may hold the lock through the same agent: no release.
    assert agent.released == 0
    assert agent.queries == []


def test_asyncio_acquire_holds_and_releases_with_async_with(agent: FakeAgent) -> None:
    async def main() -> fencepost.Lock:
        async with fencepost.acquire_async("billing", base_url=agent.url, wait=5) as lock:
            assert lock.held() and lock.token == fencepost.MAX_TOKEN
        return lock

    lock = asyncio.run(main())
    assert isinstance(lock.error, fencepost.LockReleasedError)
    assert agent.released == 1


def test_a_cancelled_asyncio_wait_cuts_the_request_and_withdraws_it(agent: FakeAgent) -> None:
    asked = threading.Event()

    def slow(query: str) -> Answer:
        asked.set()
        time.sleep(1)
        return 423, problem(
            "not-granted", 423, snapshot={"lock": "billing", "held": False, "state": "waiting"}
        )

    agent.acquire = slow

    async def main() -> float:
        task = asyncio.create_task(_wait(agent.url))
        await asyncio.to_thread(asked.wait, 5)
        start = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - start

    assert asyncio.run(main()) < 0.5
    within(5, "the cancelled request withdrawn", lambda: agent.released == 1)


async def _wait(url: str) -> fencepost.Lock:
    return await fencepost.acquire_async("billing", base_url=url)


def test_wait_async_returns_when_the_term_ends(agent: FakeAgent) -> None:
    agent.acquire, agent.state = granted(60_000), held_for(60_000)

    async def main() -> None:
        lock = await fencepost.acquire_async("billing", base_url=agent.url)
        waiter = asyncio.create_task(lock.wait_async())
        await asyncio.sleep(0.05)
        assert not waiter.done()
        await lock.release_async()
        await asyncio.wait_for(waiter, 2)

    asyncio.run(main())
