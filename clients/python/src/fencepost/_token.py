"""Fencing tokens: integers in [0, MAX_TOKEN], canonical decimal strings on the wire.

src/protocol/token.ts is the reference. A token is a Python ``int`` — exact at any size, so
2^53+1 stays 2^53+1 — but it never travels as a JSON number: a number may have passed through a
double on its way.
"""

from __future__ import annotations

import re

from ._errors import MalformedTokenError
from ._protocol import MAX_TOKEN

_CANONICAL = re.compile(r"(0|[1-9][0-9]{0,18})", re.ASCII)


def parse_token(text: object, what: str = "fencing token") -> int:
    """parse_token reads a token from a canonical decimal string.

    Only a ``str`` of ASCII digits with no sign, no leading zero, no space and no newline, at most
    MAX_TOKEN, is a token — so that one token has exactly one spelling. Anything else (an ``int``
    from a JSON number included) raises MalformedTokenError (a ValueError).
    """
    if not isinstance(text, str):
        raise MalformedTokenError(f"{what} must be a decimal string, got {type(text).__name__}")
    if _CANONICAL.fullmatch(text) is None:
        raise MalformedTokenError(
            f"{what} must be a canonical non-negative decimal integer, got {text[:40]!r}"
        )
    value = int(text)
    if value > MAX_TOKEN:
        raise MalformedTokenError(f"{what} {text} exceeds the maximum {MAX_TOKEN}")
    return value


def check_token(token: int, what: str = "fencing token") -> int:
    """check_token returns ``token`` if it is an ``int`` (not a ``bool``) in [0, MAX_TOKEN].

    The guards call it before anything is sent; it raises MalformedTokenError otherwise.
    """
    if isinstance(token, bool) or not isinstance(token, int):
        raise MalformedTokenError(f"{what} must be an int, got {type(token).__name__}")
    if token < 0 or token > MAX_TOKEN:
        raise MalformedTokenError(f"{what} {token} is outside [0, {MAX_TOKEN}]")
    return token


def format_token(token: int) -> str:
    """format_token is the canonical decimal spelling of a valid token (MalformedTokenError otherwise)."""
    return str(check_token(token))
