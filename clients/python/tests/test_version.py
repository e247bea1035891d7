"""The client is versioned with the project: its version is package.json's."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import fencepost

ROOT = Path(__file__).resolve().parents[3]


def test_the_version_is_the_project_version() -> None:
    project = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))["version"]
    pyproject = tomllib.loads((ROOT / "clients/python/pyproject.toml").read_text(encoding="utf-8"))
    assert fencepost.__version__ == project
    assert pyproject["project"]["version"] == project
