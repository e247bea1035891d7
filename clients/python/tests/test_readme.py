"""The README's examples are example programs, which ruff, mypy and the tests run: the agent's
(examples/worker.py, run by the integration test) and the Redis store's (examples/store_worker.py,
run by test_store_redis.py and stores.test.ts). A README block must not drift from its file."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def python_block(readme: str, after: str) -> str:
    """python_block is the first ```python block of ``readme`` after the line ``after``."""
    _, heading, rest = readme.partition(f"\n{after}\n")
    assert heading, f"README.md has no {after!r}"
    _, sep, block_on = rest.partition("\n```python\n")
    block, closed, _ = block_on.partition("```\n")
    assert sep and closed, f"README.md has no ```python block after {after!r}"
    return block


def test_the_readme_example_is_the_example_program() -> None:
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    assert python_block(readme, "## A complete example") == (HERE / "examples/worker.py").read_text(
        encoding="utf-8"
    ), "README.md's example differs from examples/worker.py"


def test_the_readme_store_example_is_the_store_example_program() -> None:
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    assert python_block(readme, "## Redis lock stores, without the agent") == (
        HERE / "examples/store_worker.py"
    ).read_text(encoding="utf-8"), "README.md's store example differs from examples/store_worker.py"
