"""The pure decision core of the Redis and Redlock stores (src/stores/redis/timing.ts; store.json
"timing"): how long a grant is trusted, when the watchdog renews, what a renew's outcome means, and
how long a waiter backs off. No I/O and no clock reads: every function takes the times it needs,
in milliseconds of the holder's own clock, so that each rule is a table test.

A grant's (or renew's) validity is counted from the moment the request was SENT, never from when
the answer came: Redis started the key's TTL no earlier than that, so ``sent + ttl`` bounds the
key's life as the holder's clock sees it, less the drift between the two clocks (node-redlock's
rule: drift = 1 % of the TTL + 2 ms).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .._protocol import (
    BACKOFF_BASE_MS,
    BACKOFF_CAP_MS,
    MAX_TTL_MS,
    MIN_TTL_MS,
    RENEW_RETRY_MS,
)


def check_ttl_ms(ttl_ms: int, what: str = "ttl") -> int:
    """check_ttl_ms returns ``ttl_ms`` if it is an int in [MIN_TTL_MS, MAX_TTL_MS], else raises
    ValueError naming ``what`` and the value."""
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or not MIN_TTL_MS <= ttl_ms <= MAX_TTL_MS:
        raise ValueError(
            f"fencepost: {what} must be a whole number of ms in [{MIN_TTL_MS}, {MAX_TTL_MS}], got {ttl_ms!r}"
        )
    return ttl_ms


def drift_ms(ttl_ms: int) -> int:
    """drift_ms is the clock drift a grant of ``ttl_ms`` allows for: floor(1 % of the TTL) + 2 ms."""
    return ttl_ms // 100 + 2


def valid_until(sent_ms: float, ttl_ms: int) -> float:
    """valid_until is the end of trust for a grant or renew whose request was sent at ``sent_ms``."""
    return sent_ms + ttl_ms - drift_ms(ttl_ms)


def renew_every_ms(ttl_ms: int) -> int:
    """renew_every_ms: the watchdog renews every third of the TTL, so two renews may fail before
    the key could expire."""
    return ttl_ms // 3


@dataclass(frozen=True, slots=True)
class RenewDecision:
    """RenewDecision is what the watchdog does after a renew: ``renewed`` (trust until
    ``valid_until_ms``, next renew in ``in_ms``), ``retry`` (in ``in_ms``), or ``lost`` (``reason``)."""

    kind: Literal["renewed", "retry", "lost"]
    in_ms: float = 0.0
    valid_until_ms: float = 0.0
    reason: str = ""


RenewOutcome = Literal["renewed", "not-owner", "failed"]
"""RenewOutcome is what one renew came back with: renewed; the key is gone or another owner's; no
answer (Redis down, a timeout, too few Redlock masters answered)."""


def after_renew(
    outcome: RenewOutcome,
    sent_ms: float,
    now_ms: float,
    valid_until_ms: float,
    ttl_ms: int,
    *,
    error: str = "",
) -> RenewDecision:
    """after_renew decides on a renew sent at ``sent_ms`` that came back at ``now_ms`` while the
    grant was trusted until ``valid_until_ms``. A failure is retried until the validity passes; a
    "not the owner" ends the lock at once; an answer that arrives after the new validity would
    already have passed is worth nothing. Trust never moves backwards."""
    if outcome == "not-owner":
        return RenewDecision("lost", reason="the key is gone or held by another owner")
    if outcome == "renewed":
        until = max(valid_until_ms, valid_until(sent_ms, ttl_ms))
        if now_ms >= until:
            return RenewDecision("lost", reason="the renew was answered after its validity had passed")
        return RenewDecision("renewed", in_ms=renew_every_ms(ttl_ms), valid_until_ms=until)
    if now_ms >= valid_until_ms:
        return RenewDecision("lost", reason=f"renews failed until the validity passed: {error}")
    return RenewDecision("retry", in_ms=min(RENEW_RETRY_MS, valid_until_ms - now_ms))


def backoff_ms(attempt: int, random: Callable[[], float]) -> int:
    """backoff_ms is the delay before retry number ``attempt`` (0-based): uniform in
    [0, min(2000, 50 * 2^attempt)) ms, "full jitter", so that waiters woken together do not retry
    together. ``random`` returns [0, 1)."""
    ceiling: int = min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * (1 << min(attempt, 30)))
    return math.floor(random() * ceiling)


def retry_delay_ms(
    attempt: int, random: Callable[[], float], held_for_ms: int | None, left_ms: float | None
) -> float:
    """retry_delay_ms is how long a waiter sleeps before its next try: the backoff, but no longer
    than the holder's key has left (``held_for_ms``, its PTTL, when Redis said) + 1 ms, nor than
    what is left of the caller's wait (``left_ms``)."""
    d: float = backoff_ms(attempt, random)
    if held_for_ms is not None and held_for_ms >= 0:
        d = min(d, held_for_ms + 1)
    if left_ms is not None:
        d = min(d, max(0.0, left_ms))
    return d
