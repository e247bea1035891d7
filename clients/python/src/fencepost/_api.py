"""The agent's answers (src/agent/openapi.json is the contract): lock snapshots, events, problems.

Every field is checked for its type: ``held`` must be a JSON boolean, a token a canonical decimal
string (a JSON number is refused), so that what this client believes is exactly what the agent said.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from email.message import Message
from typing import Any

from ._errors import FencepostError, problem_error
from ._token import parse_token


class ResponseError(FencepostError, ValueError):
    """ResponseError: an answer of the agent that does not follow its contract."""


def _is(v: object, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(v, bool):
        return bool in kinds
    return isinstance(v, kinds)


def _opt(body: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    v = body.get(key)
    if v is None:
        return None
    if not _is(v, kind):
        raise ResponseError(f"{what}: {key} has the wrong type")
    return v


def _req(body: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if key not in body:
        raise ResponseError(f"{what}: {key} is required")
    v = body[key]
    if not _is(v, kind):
        raise ResponseError(f"{what}: {key} has the wrong type")
    return v


def _token(body: dict[str, Any], key: str, what: str, required: bool) -> int | None:
    if key not in body or body[key] is None:
        if required:
            raise ResponseError(f"{what}: {key} is required")
        return None
    try:
        return parse_token(body[key])
    except ValueError as e:
        raise ResponseError(f"{what}: {e}") from e


@dataclass(frozen=True, slots=True)
class Draining:
    """Draining describes a planned handover under way: finish what is in flight, take no new work."""

    to: str
    deadline_in_ms: float


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Snapshot is the agent's state of one lock (GET /v1/locks/NAME, and 200 answers of acquire)."""

    lock: str
    held: bool
    """held is true while this pod validly holds the lock, checked by the agent at this read."""
    state: str
    """state is waiting, confirming, held, lost, released or stopped."""
    token: int | None = None
    """token is the token of this pod's current or last term; None when it never held the lock."""
    holder: str | None = None
    """holder is the pod the lock's Lease names, whoever it is."""
    expires_in_ms: float | None = None
    """expires_in_ms is, for a held lock, the time left before the agent stops trusting it."""
    draining: Draining | None = None
    permit: int | None = None
    """permit is the Semaphore permit this pod holds; None otherwise."""

    @classmethod
    def from_json(cls, body: object) -> Snapshot:
        """from_json checks and reads a decoded snapshot (ResponseError when it breaks the contract)."""
        what = "lock snapshot"
        if not isinstance(body, dict):
            raise ResponseError(f"{what}: not an object")
        draining = _opt(body, "draining", dict, what)
        return cls(
            lock=_req(body, "lock", str, what),
            held=_req(body, "held", bool, what),
            state=_req(body, "state", str, what),
            token=_token(body, "token", what, required=False),
            holder=_opt(body, "holder", str, what),
            expires_in_ms=_opt(body, "expiresInMs", (int, float), what),
            draining=None
            if draining is None
            else Draining(
                to=_req(draining, "to", str, what),
                deadline_in_ms=float(_req(draining, "deadlineInMs", (int, float), what)),
            ),
            permit=_opt(body, "permit", int, what),
        )


@dataclass(frozen=True, slots=True)
class Event:
    """Event is one event of a lock's stream: granted, renewed, lost, released — and, passed
    through as they come, stopping, draining and handoverCancelled."""

    type: str
    lock: str
    token: int
    reason: str | None = None
    """reason says why, for lost and released."""
    expires_in_ms: float | None = None
    """expires_in_ms is the new time left, for granted and renewed."""
    to: str | None = None
    """to is the successor pod of a planned handover (draining)."""

    @classmethod
    def from_json(cls, body: object) -> Event:
        """from_json checks and reads a decoded event (ResponseError when it breaks the contract)."""
        what = "lock event"
        if not isinstance(body, dict):
            raise ResponseError(f"{what}: not an object")
        token = _token(body, "token", what, required=True)
        assert token is not None
        return cls(
            type=_req(body, "type", str, what),
            lock=_req(body, "lock", str, what),
            token=token,
            reason=_opt(body, "reason", str, what),
            expires_in_ms=_opt(body, "expiresInMs", (int, float), what),
            to=_opt(body, "to", str, what),
        )


def decode_problem(status: int, content_type: str, body: bytes) -> FencepostError:
    """decode_problem turns an error answer into a ProblemError (the subclass its type names), or a
    plain FencepostError for a body that is not problem details."""
    msg = Message()
    msg["content-type"] = content_type or "text/plain"
    if msg.get_content_type() == "application/problem+json":
        try:
            decoded = json.loads(body)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("type"), str) and decoded["type"]:
            if not isinstance(decoded.get("status"), int) or decoded.get("status") == 0:
                decoded["status"] = status
            return problem_error(int(decoded["status"]), decoded)
    return FencepostError(f"fencepost agent: HTTP {status}: {body[:200].decode('utf-8', 'replace')}")
