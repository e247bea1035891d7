"""Shared test helpers: the conformance vectors (clients/conformance) every client runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"
"""CONFORMANCE holds the vectors and the Lua script every client shares."""


def vectors(name: str) -> Any:
    """vectors decodes one vector file of clients/conformance."""
    return json.loads((CONFORMANCE / name).read_text(encoding="utf-8"))
