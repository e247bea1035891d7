"""The agent API response vectors (clients/conformance/api-responses.json): snapshots, events,
problems and the typed errors they raise."""

from __future__ import annotations

import json
from typing import Any

import pytest

import fencepost
from conftest import vectors
from fencepost._api import decode_problem

V = vectors("api-responses.json")


@pytest.mark.parametrize("case", V["snapshots"], ids=[c["name"] for c in V["snapshots"]])
def test_snapshot_vectors(case: dict[str, Any]) -> None:
    body = json.loads(json.dumps(case["body"]))
    if not case["valid"]:
        with pytest.raises(fencepost.ResponseError):
            fencepost.Snapshot.from_json(body)
        return
    s = fencepost.Snapshot.from_json(body)
    assert s.held is case["held"]
    want = case.get("token")
    assert s.token == (None if want is None else int(want))


@pytest.mark.parametrize("case", V["events"], ids=[c["name"] for c in V["events"]])
def test_event_vectors(case: dict[str, Any]) -> None:
    body = json.loads(json.dumps(case["body"]))
    if not case["valid"]:
        with pytest.raises(fencepost.ResponseError):
            fencepost.Event.from_json(body)
        return
    e = fencepost.Event.from_json(body)
    assert e.type == case["event"]
    assert str(e.token) == case["token"]


TYPED: dict[str, type[Exception]] = {
    "not-acquired": fencepost.NotAcquiredError,
    "already-done": fencepost.AlreadyDoneError,
    "lost": fencepost.LockLostError,
}


@pytest.mark.parametrize("case", V["problems"], ids=[c["name"] for c in V["problems"]])
def test_problem_vectors(case: dict[str, Any]) -> None:
    err = decode_problem(
        case["status"], "application/problem+json; charset=utf-8", json.dumps(case["body"]).encode()
    )
    assert isinstance(err, fencepost.ProblemError)
    assert err.status == case["status"]
    for name, cls in TYPED.items():
        assert isinstance(err, cls) == (name == case["error"]), f"{err.name} as {cls.__name__}"


def test_a_body_that_is_not_problem_details_is_a_plain_error() -> None:
    err = decode_problem(502, "text/html", b"<html>bad gateway</html>")
    assert not isinstance(err, fencepost.ProblemError)
    assert "HTTP 502" in str(err)
