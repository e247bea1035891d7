"""The stores' Lua scripts, composed from the package's copies of the shared files of
clients/conformance as its store.json "scripts" says: a script is its files' bytes in order, so the
very same script (and SHA) runs whichever language sent it. A test keeps the copies equal to the
shared files, byte for byte, and the compositions equal to store.json's. Keys, arguments and
answers: each .lua file's header."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

COMPOSITION: dict[str, tuple[str, ...]] = {
    "acquire": ("fence-next.lua", "store-acquire.lua"),
    "renew": ("store-renew.lua",),
    "release": ("store-release.lua",),
    "redlockAcquire": ("fence-next.lua", "redlock-acquire.lua"),
    "redlockRaise": ("fence-next.lua", "redlock-raise.lua"),
}
"""COMPOSITION names the files of each script the stores run (store.json "scripts")."""


@dataclass(frozen=True, slots=True)
class Script:
    """Script is one composed Lua script and its SHA-1 (for EVALSHA)."""

    name: str
    source: str
    sha: str


@cache
def lua_file(name: str) -> bytes:
    """lua_file is one packaged .lua file's bytes."""
    return files(__package__).joinpath(name).read_bytes()


@cache
def script(name: str) -> Script:
    """script is the composed script ``name`` (a key of COMPOSITION)."""
    data = b"".join(lua_file(f) for f in COMPOSITION[name])
    return Script(name, data.decode("utf-8"), hashlib.sha1(data).hexdigest())
