"""fencepost: the Python client of fencepost's agent.

It asks the agent sidecar in the same pod for a lock over its local HTTP API (docs/agent.md,
"Local HTTP API"; the OpenAPI document is served at /openapi.json), hands the application the
lock's fencing token as an exact ``int``, tells it when the lock is lost, and releases it::

    with fencepost.acquire("billing", wait=30) as lock:       # NotAcquiredError after 30 s
        guard.write("orders:42", lock.token, value)          # fencepost.guard.RedisGuard

    async with fencepost.acquire_async("billing", wait=30) as lock:
        ...

Belief is bounded by the clock, as in the TypeScript library: ``Lock.held()`` is False once the
time the agent gave for the term has passed since this process asked — on the monotonic and the
wall clock, whichever ran further (a VM pause stops the former). A process paused between
``held()`` and its write still writes with its old token: only the resource can refuse it, which
is what the guards of ``fencepost.guard`` do.

``fencepost.store`` holds a lock without the agent, in Redis or on Redlock masters, with the keys,
scripts and token rules of the TypeScript library's stores (a Python and a Node worker contend for
one lock): ``with fencepost.store.acquire("billing", "redis://127.0.0.1:6379") as lock:``.
"""

from ._api import Draining, Event, ResponseError, Snapshot
from ._clock import remaining
from ._errors import (
    PROBLEM_BASE,
    AgentRequestError,
    AlreadyDoneError,
    AlreadyDoneProblem,
    FencepostError,
    LockHeldProblem,
    LockLostError,
    LockReleasedError,
    MalformedTokenError,
    NotAcquiredError,
    NotGrantedProblem,
    NotHeldProblem,
    ProblemError,
)
from ._http import BASE_URL_ENV, DEFAULT_BASE_URL
from ._lock import AcquireAsync, IfHeld, Lock, acquire, acquire_async
from ._protocol import MAX_TOKEN
from ._token import check_token, format_token, parse_token

__version__ = "0.1.0"
"""__version__ is the fencepost release this client belongs to (package.json's version)."""

__all__ = [
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "MAX_TOKEN",
    "PROBLEM_BASE",
    "AcquireAsync",
    "AgentRequestError",
    "AlreadyDoneError",
    "AlreadyDoneProblem",
    "Draining",
    "Event",
    "FencepostError",
    "IfHeld",
    "Lock",
    "LockHeldProblem",
    "LockLostError",
    "LockReleasedError",
    "MalformedTokenError",
    "NotAcquiredError",
    "NotGrantedProblem",
    "NotHeldProblem",
    "ProblemError",
    "ResponseError",
    "Snapshot",
    "__version__",
    "acquire",
    "acquire_async",
    "check_token",
    "format_token",
    "parse_token",
    "remaining",
]
