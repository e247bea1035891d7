"""Server-Sent Events, as the agent frames them (docs/agent.md, the event stream)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEMessage:
    """SSEMessage is one Server-Sent Events message; event is "message" when the frame named none."""

    id: str
    event: str
    data: str


def parse_sse(lines: Iterable[str]) -> Iterator[SSEMessage]:
    """parse_sse yields the messages of a stream given line by line (with or without their line
    endings). Comments (": ping") and retry fields are skipped; the last id carries over to later
    messages that name none, as an EventSource's last event id does."""
    last_id = ""
    event = ""
    data: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if line == "":
            if data or event:
                yield SSEMessage(id=last_id, event=event or "message", data="\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            last_id = value
