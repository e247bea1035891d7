"""The README's example is examples/worker.py, which ruff, mypy and the integration test run: the
two must not drift."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def test_the_readme_example_is_the_example_program() -> None:
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    _, sep, after = readme.partition("\n```python\n")
    block, closed, _ = after.partition("```\n")
    assert sep and closed, "README.md has no ```python block"
    assert block == (HERE / "examples/worker.py").read_text(encoding="utf-8"), (
        "README.md's example differs from examples/worker.py"
    )
