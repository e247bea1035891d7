"""Real redis-servers for the store tests, started and stopped by the tests themselves: REDIS_SERVER,
else the first redis-server on PATH, on free loopback ports, without persistence. Without one the
tests that need it are skipped, saying so (hack/test-clients.sh requires a redis-server, so CI
runs them)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
import redis


def redis_server_binary() -> str | None:
    """redis_server_binary is REDIS_SERVER, else redis-server on PATH, else None."""
    return os.environ.get("REDIS_SERVER") or shutil.which("redis-server")


def free_port() -> int:
    """free_port is a loopback port nothing listened on a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RedisServer:
    """RedisServer is one redis-server this process started (stop() ends it, and only it)."""

    def __init__(self, binary: str) -> None:
        self._binary = binary
        self._dir = tempfile.mkdtemp(prefix="fencepost-py-redis-")
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        """url is the server's redis:// URL."""
        return f"redis://127.0.0.1:{self.port}"

    @property
    def address(self) -> str:
        """address is host:port."""
        return f"127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        """client is a new redis-py client of this server (decoded responses)."""
        return redis.Redis(host="127.0.0.1", port=self.port, decode_responses=True)

    def start(self) -> None:
        """start starts the server (on its old port after a stop; a new free port the first time)."""
        for _ in range(5):
            port = self.port or free_port()
            proc = subprocess.Popen(
                [
                    self._binary,
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    self._dir,
                    "--protected-mode",
                    "yes",
                    "--loglevel",
                    "warning",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 10
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    with redis.Redis(host="127.0.0.1", port=port, socket_timeout=1) as c:
                        pid = int(c.info("server")["process_id"])
                except redis.RedisError:
                    time.sleep(0.02)
                    continue
                if pid == proc.pid:
                    self.port, self._proc = port, proc
                    return
                # Another redis-server took the port between free_port and our bind: it is the
                # one answering, and ours will exit. Try again, on another port the first time.
                break
            proc.kill()
            proc.wait()
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        """stop ends the server (SIGCONT first, in case it was paused)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGCONT)
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def pause(self) -> None:
        """pause SIGSTOPs the server: it accepts connections but answers nothing."""
        if self._proc is not None:
            self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """resume SIGCONTs a paused server."""
        if self._proc is not None:
            self._proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        """close stops the server and removes its folder."""
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)


@contextmanager
def redis_servers(n: int) -> Iterator[list[RedisServer]]:
    """redis_servers starts ``n`` servers (skipping the test when there is no redis-server) and
    stops them after."""
    binary = redis_server_binary()
    if binary is None:
        pytest.skip("redis-server not found (PATH or REDIS_SERVER): the store tests need a real one")
    servers: list[RedisServer] = []
    try:
        with ThreadPoolExecutor(n) as pool:  # started together: each takes a few tens of ms
            for f in [pool.submit(RedisServer, binary) for _ in range(n)]:
                servers.append(f.result())
        yield servers
    finally:
        for s in servers:
            s.close()
