"""Store URLs, parsed and checked before anything connects (src/stores/url.ts is the reference)::

    redis://[[user]:password@]host[:port][/db]            one Redis (rediss:// for TLS)
    redlock://[[user]:password@]h1:p1,h2:p2,h3:p3[/db]    Redlock over N independent masters (N >= 3)

The default port is 6379. Several hosts are a comma-separated list, which urllib cannot parse, so
the parsing is by hand, rule for rule the TypeScript one. ``redis+sentinel://`` and
``redis+cluster://`` are TypeScript-only for now and refused here, saying so. Errors name the
option (``what``) and the URL with its password replaced by ``***``: an error message ends up in
logs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import unquote

from .._errors import FencepostError
from .._protocol import MIN_REDLOCK_MASTERS

DEFAULT_PORT = 6379
"""DEFAULT_PORT is the port of a host named without one."""


class StoreUrlError(FencepostError, ValueError):
    """StoreUrlError: a store URL was refused; the message names the option and the (redacted) URL.
    ``problem`` is the message without the option's name (for a CLI that prefixes its flag)."""

    def __init__(self, what: str, problem: str) -> None:
        super().__init__(f"{what}: {problem}")
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Endpoint is one host and port (an IPv6 address without its brackets)."""

    host: str
    port: int


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """RedisTarget is one Redis server as the store connects to it."""

    endpoint: Endpoint
    db: int = 0
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """StoreSpec is a parsed store URL: one target for ``redis``, the masters for ``redlock``;
    ``display`` is the URL with the password redacted."""

    kind: Literal["redis", "redlock"]
    targets: tuple[RedisTarget, ...]
    display: str


_SHAPE = re.compile(r"([a-z][a-z0-9+.-]*)://(?:([^@/?#]*)@)?([^/?#]*)(/[^?#]*)?([?#].*)?", re.I | re.A)
_HOST = re.compile(r"\[[0-9a-f:.]+\]|[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?", re.I | re.A)
_ENDPOINT = re.compile(r"(.*?)(?::([0-9]+))?", re.A)
_DB = re.compile(r"0|[1-9][0-9]{0,3}", re.A)
_REDACT = re.compile(r"^([a-z][a-z0-9+.-]*://[^:@/?#]*:)[^@/?#]*@", re.I | re.A)
_BAD_PERCENT = re.compile(r"%(?![0-9a-fA-F]{2})")


def redact(url: str) -> str:
    """redact replaces the password of a URL's user info with ``***``."""
    return _REDACT.sub(r"\1***@", url, count=1)


class _Refused(Exception):
    def __init__(self, problem: str) -> None:
        self.problem = problem


def parse_store_url(url: str, what: str = "store") -> StoreSpec:
    """parse_store_url parses ``url`` (see the module comment); ``what`` names the option in errors
    (StoreUrlError, a ValueError)."""
    display = redact(url)
    try:
        return _parse(url, display)
    except _Refused as r:
        raise StoreUrlError(what, f"{r.problem}, got {json.dumps(display, ensure_ascii=False)}") from None


def _parse(url: str, display: str) -> StoreSpec:
    m = _SHAPE.fullmatch(url)
    if m is None:
        raise _Refused("must be a URL such as redis://127.0.0.1:6379 or redlock://h1:6379,h2:6379,h3:6379")
    scheme = m.group(1).lower()
    username, password = _auth(m.group(2))
    path = (m.group(4) or "").removeprefix("/")
    if m.group(5) is not None:
        raise _Refused("takes no query or fragment")
    endpoints = [_endpoint(h) for h in (m.group(3) or "").split(",")]
    if scheme in ("redis+sentinel", "redis+cluster"):
        raise _Refused(
            f"{scheme}:// is not supported by the Python client (the TypeScript library has it); "
            "use redis://, rediss:// or redlock://"
        )
    if scheme not in ("redis", "rediss", "redlock"):
        raise _Refused(f"scheme {scheme}:// is not a store; use redis://, rediss:// or redlock://")
    if "/" in path:
        raise _Refused("the path is the database number only")
    if path and _DB.fullmatch(path) is None:
        raise _Refused(f"database must be a number from 0 to 9999, not {json.dumps(path)}")
    db = int(path) if path else 0
    if scheme in ("redis", "rediss"):
        if len(endpoints) != 1:
            raise _Refused(f"{scheme}:// takes one host; for several masters use redlock://")
        target = RedisTarget(endpoints[0], db, scheme == "rediss", username, password)
        return StoreSpec("redis", (target,), display)
    if len(endpoints) < MIN_REDLOCK_MASTERS:
        raise _Refused(
            f"redlock:// needs at least {MIN_REDLOCK_MASTERS} independent masters (5 is usual), "
            f"not {len(endpoints)}"
        )
    seen: set[str] = set()
    for e in endpoints:
        key = f"{e.host.lower()}:{e.port}"
        if key in seen:
            raise _Refused(f"master {key} is named twice; Redlock's majority needs distinct masters")
        seen.add(key)
    return StoreSpec(
        "redlock", tuple(RedisTarget(e, db, False, username, password) for e in endpoints), display
    )


def _auth(info: str | None) -> tuple[str | None, str | None]:
    if not info:
        return None, None
    user, colon, password = info.partition(":")
    username = _decode(user)
    return (username or None), (_decode(password) if colon else None)


def _decode(s: str) -> str:
    if _BAD_PERCENT.search(s) is not None:
        raise _Refused("the user info is not valid percent-encoding")
    try:
        return unquote(s, errors="strict")
    except UnicodeDecodeError:
        raise _Refused("the user info is not valid percent-encoding") from None


def _endpoint(text: str) -> Endpoint:
    if text == "":
        raise _Refused("a host is missing")
    m = _ENDPOINT.fullmatch(text)
    host = m.group(1) if m is not None else ""
    if _HOST.fullmatch(host) is None:
        raise _Refused(f"{json.dumps(host, ensure_ascii=False)} is not a host name or address")
    port_text = m.group(2) if m is not None else None
    port = int(port_text) if port_text is not None else DEFAULT_PORT
    if not 1 <= port <= 65535:
        raise _Refused(f"port {port_text} is not in 1..65535")
    return Endpoint(host[1:-1] if host.startswith("[") else host, port)
