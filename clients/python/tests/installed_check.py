"""installed_check: run by hack/test-clients.sh with the Python of a fresh virtualenv into which
the built wheel or sdist (and nothing else) was installed, from a folder outside the checkout, so
that ``import fencepost`` can only find the installed package. Exits non-zero on the first failed
check. Not a pytest module: pytest runs against the editable install instead."""

import importlib.metadata
import importlib.resources
import os
import sys
from pathlib import Path

import fencepost
import fencepost._protocol
import fencepost.guard
from fencepost.guard._redis import fenced_write_lua


def main() -> None:
    installed = Path(fencepost.__file__).resolve()
    assert installed.is_relative_to(Path(sys.prefix).resolve()), f"imported from {installed}, not the venv"
    # Typed: py.typed ships, so mypy users get the annotations.
    assert importlib.resources.files("fencepost").joinpath("py.typed").is_file(), "py.typed missing"
    # The Lua scripts the guard and the stores run ship inside the package, in the generated
    # fencepost._protocol (fencepost.store itself needs the redis extra, which this venv lacks on
    # purpose).
    assert "redis.call" in fenced_write_lua(), "guard script missing"
    assert "fence_next" in fencepost._protocol.ACQUIRE_LUA, "store scripts missing"
    assert fencepost.parse_token("215") == 215
    # acquire() speaks to the agent: with nothing listening it names the request that failed.
    os.environ[fencepost.BASE_URL_ENV] = "http://127.0.0.1:1"
    try:
        with fencepost.acquire("billing", wait=1):
            raise AssertionError("acquired without an agent")
    except fencepost.AgentRequestError as e:
        assert "/v1/locks/billing/acquire" in str(e), str(e)
    licenses = [f for f in (importlib.metadata.files("fencepost") or []) if f.name == "LICENSE"]
    assert licenses, "LICENSE not in the distribution"
    print(f"fencepost {fencepost.__version__} from {installed.parent}: ok")


if __name__ == "__main__":
    main()
