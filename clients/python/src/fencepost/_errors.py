"""The errors a lock and the guards raise: catch them by class.

- NotAcquiredError: not granted within the wait, or held by another pod with ``if_held="fail"``.
- AlreadyDoneError: the run id was already completed by some holder. Do not run it.
- LockLostError: the term ended without a release. Stop writing.
- LockReleasedError: the term was released by this process (``Lock.error`` after ``release()``).

The agent's problem details (RFC 9457) are ProblemError; the ones with a meaning above are also
instances of that class (``NotGrantedProblem`` is a NotAcquiredError, and so on).
"""

from __future__ import annotations

from typing import Any


class FencepostError(Exception):
    """FencepostError is the base of every error of this package."""


class MalformedTokenError(FencepostError, ValueError):
    """MalformedTokenError: a value that is not a canonical fencing token in [0, MAX_TOKEN]."""


class NotAcquiredError(FencepostError):
    """NotAcquiredError: the lock was not granted within the wait, or another pod holds it and the
    caller asked not to wait (if_held="fail")."""


class AlreadyDoneError(FencepostError):
    """AlreadyDoneError: the run id was already completed (409 already-done). Do not run it."""


class LockLostError(FencepostError):
    """LockLostError: the term ended without a release — its time ran out, the agent said lost, or
    the agent no longer holds the lock with this token (409 not-held). Stop writing."""


class LockReleasedError(FencepostError):
    """LockReleasedError: the term was released by this process (the lock's ``error`` then)."""


PROBLEM_BASE = "https://fencepost.io/problems/"
"""PROBLEM_BASE prefixes every problem type of the agent's API."""


class AgentRequestError(FencepostError):
    """AgentRequestError: a request to the agent failed on the way (refused, reset, timed out)."""


class ProblemError(FencepostError):
    """ProblemError is an RFC 9457 problem the agent answered with (application/problem+json).

    ``name`` is the type without PROBLEM_BASE ("not-granted", "held", ...); ``body`` is the whole
    decoded problem, extension members (lock, holder, runId, snapshot, ...) included.
    """

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.type: str = str(body.get("type", ""))
        self.title: str = str(body.get("title", ""))
        self.detail: str = str(body.get("detail", ""))
        self.body = body
        super().__init__(f"fencepost agent: {status} {self.name}: {self.detail}")

    @property
    def name(self) -> str:
        """name is the problem type without its base URI."""
        return self.type.removeprefix(PROBLEM_BASE)


class NotGrantedProblem(ProblemError, NotAcquiredError):
    """NotGrantedProblem: 423 not-granted (not granted within the request's wait)."""


class LockHeldProblem(ProblemError, NotAcquiredError):
    """LockHeldProblem: 423 held — another pod holds the lock and the caller asked not to wait."""

    @property
    def holder(self) -> str:
        """holder is the pod that holds the lock, as the agent named it."""
        return str(self.body.get("holder", ""))


class AlreadyDoneProblem(ProblemError, AlreadyDoneError):
    """AlreadyDoneProblem: 409 already-done."""


class NotHeldProblem(ProblemError, LockLostError):
    """NotHeldProblem: 409 not-held (complete: this pod does not hold the lock with that token)."""


def problem_error(status: int, body: dict[str, Any]) -> ProblemError:
    """problem_error builds the ProblemError subclass that matches the problem's type."""
    name = str(body.get("type", "")).removeprefix(PROBLEM_BASE)
    cls: type[ProblemError] = {
        "not-granted": NotGrantedProblem,
        "held": LockHeldProblem,
        "already-done": AlreadyDoneProblem,
        "not-held": NotHeldProblem,
    }.get(name, ProblemError)
    return cls(status, body)
