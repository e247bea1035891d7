"""The term's clock rule (a pure function, as in clients/go) and the SSE parser on the agent's framing."""

from __future__ import annotations

import pytest

from fencepost import remaining
from fencepost._sse import SSEMessage, parse_sse


@pytest.mark.parametrize(
    ("mono", "wall", "want"),
    [
        pytest.param(1, 1, 5, id="both clocks agree"),
        pytest.param(
            1, 11, -5, id="a VM pause: the monotonic clock stood still for 10 s while the wall clock ran"
        ),
        pytest.param(2, -3600, 4, id="the wall clock stepped back: the monotonic clock counts"),
        pytest.param(1, 7, -1, id="the wall clock stepped forward: the term ends early (safe)"),
    ],
)
def test_the_term_runs_by_whichever_clock_ran_further(mono: float, wall: float, want: float) -> None:
    assert remaining(6, mono, wall) == want


def test_sse_messages_are_parsed_as_the_agent_sends_them() -> None:
    stream = (
        "retry: 1000\n\n"
        'event: state\nid: p-1\ndata: {"lock":"billing"}\n\n'
        ": ping\n\n"
        'event: renewed\r\nid: p-2\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
        "data: plain\n\n"
    )
    got = list(parse_sse(stream.splitlines(keepends=True)))
    assert got == [
        SSEMessage(id="p-1", event="state", data='{"lock":"billing"}'),
        SSEMessage(id="p-2", event="renewed", data='{"a":\n1}'),
        SSEMessage(id="p-2", event="message", data="plain"),
    ]
