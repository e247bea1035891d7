"""Owner ids of store locks (src/stores/owner.ts; clients/conformance/store.json "ownerId"): a fresh
random value per attempt — the only thing a renew and a release prove ownership with, so it is
unguessable and never reused — optionally followed by ``/<pod name>/<pod uid>`` when the holder
runs in a Kubernetes pod, so that the controller, which observes store locks without granting
them, can show who holds one. The suffix is public and adds no secrecy; the random part alone
carries it. A release publishes the owner id on the lock's channel.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass

_POD_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?", re.ASCII)
_POD_UID = re.compile(r"[A-Za-z0-9-]{1,64}", re.ASCII)


@dataclass(frozen=True, slots=True)
class Pod:
    """Pod is one incarnation of the Kubernetes pod a holder runs in: its name and uid."""

    name: str
    uid: str

    def valid(self) -> bool:
        """valid: a DNS subdomain name and a uid of letters, digits and dashes (at most 64)."""
        return _POD_NAME.fullmatch(self.name) is not None and _POD_UID.fullmatch(self.uid) is not None


def pod_from_env() -> Pod | None:
    """pod_from_env is the pod of $POD_NAME and $POD_UID (the downward API) when both are set."""
    name, uid = os.environ.get("POD_NAME", ""), os.environ.get("POD_UID", "")
    return Pod(name, uid) if name and uid else None


def new_owner_id(pod: Pod | None = None) -> str:
    """new_owner_id: 128 bits from the CSPRNG as lowercase hex, then ``/<name>/<uid>`` of ``pod``
    when it is given and valid (an invalid one is left out: it is only a name to show)."""
    random_part = secrets.token_hex(16)
    return f"{random_part}/{pod.name}/{pod.uid}" if pod is not None and pod.valid() else random_part


def pod_of_owner(owner: str) -> Pod | None:
    """pod_of_owner reads the holder pod from an owner id; None when it names none (or not validly)."""
    parts = owner.split("/")
    if len(parts) != 3 or parts[0] == "":
        return None
    pod = Pod(parts[1], parts[2])
    return pod if pod.valid() else None
