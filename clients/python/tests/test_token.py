"""The token vectors (clients/conformance/tokens.json) and the token's range checks."""

from __future__ import annotations

import json
from typing import Any

import pytest

import fencepost
from conftest import vectors

V = vectors("tokens.json")


def test_max_token_is_the_vectors_maximum() -> None:
    assert str(fencepost.MAX_TOKEN) == V["maxToken"]
    assert fencepost.MAX_TOKEN == 2**63 - 1


@pytest.mark.parametrize("case", V["parse"], ids=[c["name"] for c in V["parse"]])
def test_token_parse_vectors(case: dict[str, Any]) -> None:
    # As tokens arrive from the agent: a decoded JSON value; only a string may be a token.
    value = json.loads(json.dumps(case["input"]))
    if case["valid"]:
        got = fencepost.parse_token(value)
        assert isinstance(got, int)
        assert str(got) == case["value"]
        assert fencepost.format_token(got) == case["value"]
    else:
        with pytest.raises(fencepost.MalformedTokenError):
            fencepost.parse_token(value)


@pytest.mark.parametrize("case", V["compare"], ids=[f"{c['a']} {c['b']}" for c in V["compare"]])
def test_token_compare_vectors(case: dict[str, Any]) -> None:
    a, b = fencepost.parse_token(case["a"]), fencepost.parse_token(case["b"])
    assert (a > b) - (a < b) == case["order"]


@pytest.mark.parametrize("bad", [2**63, -1, True, 1.0, "1"])
def test_an_out_of_range_or_non_int_token_is_refused_before_use(bad: Any) -> None:
    with pytest.raises(fencepost.MalformedTokenError):
        fencepost.check_token(bad)


def test_the_malformed_token_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        fencepost.parse_token("007")
