"""What a guard did with a write."""

from __future__ import annotations

import enum


class Outcome(enum.StrEnum):
    """Outcome is what a guard did with a write. APPLIED and NOT_FOUND raise the mark to the token;
    DUPLICATE and STALE change nothing."""

    APPLIED = "applied"
    """APPLIED: the token was not below the mark; the write happened and the mark is the token."""
    DUPLICATE = "duplicate"
    """DUPLICATE: the write id was already applied within the window; nothing changed."""
    STALE = "stale"
    """STALE: the token was below the mark; nothing changed."""
    NOT_FOUND = "not-found"
    """NOT_FOUND (SQL update and upsert): the token was accepted and the mark raised, but no row
    has the id."""
