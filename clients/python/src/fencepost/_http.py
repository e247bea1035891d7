"""The HTTP side of one lock: requests to the agent over http.client, and their answers.

The standard library is enough: the agent is on loopback, requests are few, and every one is
bounded by a socket timeout. A request in flight can be aborted from another thread (abort()),
which is how a release stops the event stream and how a cancelled asyncio wait stops its request.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import threading
from urllib.parse import quote, urlencode, urlsplit

from ._api import ResponseError, Snapshot, decode_problem
from ._errors import AgentRequestError, FencepostError

DEFAULT_BASE_URL = "http://127.0.0.1:7370"
"""DEFAULT_BASE_URL is where the agent serves its lock API by default (``--listen 127.0.0.1:7370``)."""

BASE_URL_ENV = "FENCEPOST_AGENT_URL"
"""BASE_URL_ENV names the environment variable that overrides DEFAULT_BASE_URL."""

_MAX_BODY = 1 << 20


class Agent:
    """Agent sends one lock's requests to the agent at a base URL."""

    def __init__(self, lock: str, base_url: str | None) -> None:
        base = base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"fencepost: base URL {base!r} is not an http(s) URL")
        if not lock:
            raise ValueError("fencepost: lock name is empty")
        self.lock = lock
        self.base = base.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._mu = threading.Lock()
        self._inflight: set[http.client.HTTPConnection] = set()

    def path(self, suffix: str = "", query: dict[str, str] | None = None) -> str:
        """path is the lock's endpoint with a suffix ("", "/acquire", ...) and a query (keys sorted)."""
        p = f"{self._prefix}/v1/locks/{quote(self.lock, safe='')}{suffix}"
        if query:
            p += "?" + urlencode(sorted(query.items()))
        return p

    def connect(self, timeout: float) -> http.client.HTTPConnection:
        """connect returns a new connection (not yet open) that abort() can cut."""
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=timeout)
        with self._mu:
            self._inflight.add(conn)
        return conn

    def done(self, conn: http.client.HTTPConnection) -> None:
        """done closes conn and forgets it."""
        with self._mu:
            self._inflight.discard(conn)
        conn.close()

    def abort(self) -> None:
        """abort cuts every request in flight (their callers see an AgentRequestError)."""
        with self._mu:
            conns = list(self._inflight)
        for c in conns:
            cut(c)

    def do(self, method: str, path: str, timeout: float) -> Snapshot:
        """do sends a request and reads a 200 answer as a Snapshot. Any other answer raises the
        ProblemError the agent sent (or a FencepostError); a failure on the way AgentRequestError."""
        conn = self.connect(timeout)
        url = self.base + path.removeprefix(self._prefix)
        try:
            # A POST carries Content-Type: application/json and the body {}: the agent refuses any
            # other POST (415), so that a web page cannot send one across sites.
            if method == "POST":
                conn.request(
                    method,
                    path,
                    body=b"{}",
                    headers={"Accept": "application/json", "Content-Type": "application/json"},
                )
            else:
                conn.request(method, path, headers={"Accept": "application/json"})
            res = conn.getresponse()
            body = res.read(_MAX_BODY)
            status, ctype = res.status, res.getheader("Content-Type", "")
        except (OSError, http.client.HTTPException) as e:
            raise AgentRequestError(f"fencepost agent: {method} {url}: {e}") from e
        finally:
            self.done(conn)
        if status != 200:
            raise decode_problem(status, ctype, body)
        try:
            return Snapshot.from_json(json.loads(body))
        except ValueError as e:
            raise ResponseError(f"fencepost agent: {method} {url}: {e}") from e

    def withdraw(self, timeout: float = 5.0) -> None:
        """withdraw releases, best effort, what an abandoned acquire may have left: a queued request
        or a term granted while its answer was lost."""
        with contextlib.suppress(FencepostError):
            self.do("POST", self.path("/release"), timeout)


def cut(conn: http.client.HTTPConnection) -> None:
    """cut shuts a connection's socket down, so that a read blocked on it in another thread ends."""
    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
