"""The Redis lock stores without servers: clients/conformance/store.json's vectors (keys, invalid
names, timing), its script compositions against the packaged copies of the shared .lua files (byte
for byte), the store URLs of src/stores/url.ts, and the pure timing rules as tables."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from conftest import CONFORMANCE, vectors
from fencepost.store import (
    DEFAULT_TTL_MS,
    MAX_TTL_MS,
    MIN_TTL_MS,
    Pod,
    StoreUrlError,
    drift_ms,
    lock_keys,
    new_owner_id,
    parse_store_url,
    pod_of_owner,
    quorum,
    redact,
    renew_every_ms,
)
from fencepost.store._scripts import SOURCES, script
from fencepost.store._timing import after_renew, backoff_ms, check_ttl_ms, retry_delay_ms, valid_until

S = vectors("store.json")


# --- keys -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", S["keys"]["vectors"], ids=lambda c: f"{c['namespace']}/{c['name']}")
def test_the_keys_of_a_lock_are_store_jsons(case: dict[str, str]) -> None:
    k = lock_keys(case["namespace"], case["name"])
    assert (k.counter, k.holder, k.epoch, k.channel) == (
        case["counter"],
        case["holder"],
        case["epoch"],
        case["channel"],
    )


@pytest.mark.parametrize("name", S["keys"]["invalid"], ids=repr)
def test_a_name_that_is_not_a_dns_label_is_refused_naming_it(name: str) -> None:
    with pytest.raises(ValueError, match=re.escape(json.dumps(name))):
        lock_keys("default", name)
    with pytest.raises(ValueError, match="namespace"):
        lock_keys(name, "billing")


def test_the_longest_dns_label_is_a_name() -> None:
    assert lock_keys("default", "a" * 63).counter == "fencepost:fence:default/" + "a" * 63


# --- scripts --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_script_is_composed_as_store_json_says(name: str) -> None:
    shared = b"".join((CONFORMANCE / f).read_bytes() for f in S["scripts"][name])
    assert script(name).source.encode() == shared


def test_every_store_script_of_store_json_is_composed_here() -> None:
    stores = {k for k, v in S["scripts"].items() if isinstance(v, list)} - {"fenceNext"}
    assert stores == set(SOURCES)


# --- timing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", S["timing"]["vectors"], ids=lambda c: f"ttl={c['ttlMs']}")
def test_timing_vectors(case: dict[str, int]) -> None:
    assert drift_ms(case["ttlMs"]) == case["driftMs"]
    assert renew_every_ms(case["ttlMs"]) == case["renewEveryMs"]
    assert valid_until(1000.0, case["ttlMs"]) == 1000 + case["ttlMs"] - case["driftMs"]


def test_ttl_bounds_are_store_jsons() -> None:
    t = S["timing"]["ttlMs"]
    assert (t["min"], t["max"], t["default"]) == (MIN_TTL_MS, MAX_TTL_MS, DEFAULT_TTL_MS)
    for ok in (MIN_TTL_MS, MAX_TTL_MS):
        assert check_ttl_ms(ok) == ok
    for bad in (MIN_TTL_MS - 1, MAX_TTL_MS + 1, True, 1000.0):
        with pytest.raises(ValueError, match="ttl"):
            check_ttl_ms(bad)  # type: ignore[arg-type]


RENEW_CASES: list[tuple[str, Any, Any]] = [
    (
        "a renew is trusted from when it was sent",
        ("renewed", 100.0, 150.0, 900.0, 1000),
        ("renewed", 333, 1088.0),
    ),
    (
        "trust never moves backwards",
        ("renewed", 100.0, 150.0, 5000.0, 1000),
        ("renewed", 333, 5000.0),
    ),
    ("an answer after its own validity is worth nothing", ("renewed", 100.0, 1088.0, 900.0, 1000), ("lost",)),
    ("not the owner ends the lock at once", ("not-owner", 100.0, 101.0, 900.0, 1000), ("lost",)),
    ("a failure is retried in 100 ms", ("failed", 100.0, 150.0, 900.0, 1000), ("retry", 100)),
    ("a failure near the end is retried at the end", ("failed", 100.0, 850.0, 900.0, 1000), ("retry", 50.0)),
    ("failures until the validity passed lose the lock", ("failed", 100.0, 900.0, 900.0, 1000), ("lost",)),
]


@pytest.mark.parametrize(("why", "given", "want"), RENEW_CASES, ids=[c[0] for c in RENEW_CASES])
def test_after_renew(why: str, given: tuple[Any, ...], want: tuple[Any, ...]) -> None:
    outcome, sent, now, until, ttl = given
    d = after_renew(outcome, sent, now, until, ttl, error="x")
    assert d.kind == want[0], why
    if d.kind == "renewed":
        assert (d.in_ms, d.valid_until_ms) == want[1:]
    if d.kind == "retry":
        assert d.in_ms == want[1]


def test_the_backoff_is_full_jitter_doubling_from_50_ms_to_2_s() -> None:
    top = 1 - 2**-53
    assert [backoff_ms(a, lambda: top) for a in range(8)] == [49, 99, 199, 399, 799, 1599, 1999, 1999]
    assert all(backoff_ms(a, lambda: 0.0) == 0 for a in range(8))
    assert backoff_ms(10_000, lambda: 0.5) == 1000


def test_a_waiter_sleeps_no_longer_than_the_holders_pttl_nor_its_own_wait() -> None:
    top = 1 - 2**-53
    assert retry_delay_ms(6, lambda: top, None, None) == 1999
    assert retry_delay_ms(6, lambda: top, 30, None) == 31
    assert retry_delay_ms(6, lambda: top, 30, 12.5) == 12.5
    assert retry_delay_ms(6, lambda: top, -1, None) == 1999  # PTTL -1: no TTL said
    assert retry_delay_ms(6, lambda: top, None, -5) == 0


def test_quorum_is_a_majority() -> None:
    assert [quorum(n) for n in (3, 4, 5, 7)] == [2, 3, 3, 4]


def test_owner_ids_are_128_random_bits_new_every_time() -> None:
    ids = {new_owner_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)


@pytest.mark.parametrize("case", S["ownerVectors"], ids=lambda c: c["owner"])
def test_owner_id_vectors_name_the_holder_pod_or_none(case: dict[str, Any]) -> None:
    want = None if case["pod"] is None else Pod(case["pod"]["name"], case["pod"]["uid"])
    assert pod_of_owner(case["owner"]) == want


def test_an_owner_id_names_its_pod_only_when_the_pod_is_valid() -> None:
    owner = new_owner_id(Pod("web-7d9f-x2k4q", "4f6c1d2e-8b3a-4e5f-9a7b-0c1d2e3f4a5b"))
    assert re.fullmatch(r"[0-9a-f]{32}/web-7d9f-x2k4q/4f6c1d2e-8b3a-4e5f-9a7b-0c1d2e3f4a5b", owner)
    assert pod_of_owner(owner) == Pod("web-7d9f-x2k4q", "4f6c1d2e-8b3a-4e5f-9a7b-0c1d2e3f4a5b")
    assert re.fullmatch(r"[0-9a-f]{32}", new_owner_id(Pod("Web", "uid")))
    assert re.fullmatch(r"[0-9a-f]{32}", new_owner_id(Pod("web", "")))


# --- URLs -----------------------------------------------------------------------------------------


def test_redis_url_defaults() -> None:
    s = parse_store_url("redis://127.0.0.1")
    assert s.kind == "redis" and s.display == "redis://127.0.0.1"
    (t,) = s.targets
    assert (t.endpoint.host, t.endpoint.port, t.db, t.tls, t.username, t.password) == (
        "127.0.0.1",
        6379,
        0,
        False,
        None,
        None,
    )


def test_rediss_url_with_credentials_port_and_database_hides_the_password() -> None:
    s = parse_store_url("rediss://app:s%3Fcret@redis.example:6380/2")
    (t,) = s.targets
    assert (t.endpoint.host, t.endpoint.port, t.db, t.tls, t.username, t.password) == (
        "redis.example",
        6380,
        2,
        True,
        "app",
        "s?cret",
    )
    assert s.display == "rediss://app:***@redis.example:6380/2"
    assert "s?cret" not in repr(s)


def test_an_ipv6_address_in_brackets() -> None:
    (t,) = parse_store_url("redis://[::1]:7000").targets
    assert (t.endpoint.host, t.endpoint.port) == ("::1", 7000)


def test_redlock_url_with_five_masters_sharing_the_credentials() -> None:
    s = parse_store_url("redlock://:pw@h1:1,h2:2,h3:3,h4:4,h5")
    assert s.kind == "redlock"
    assert [f"{t.endpoint.host}:{t.endpoint.port}" for t in s.targets] == [
        "h1:1",
        "h2:2",
        "h3:3",
        "h4:4",
        "h5:6379",
    ]
    assert all(t.password == "pw" and t.username is None for t in s.targets)


REFUSED = [
    ("localhost:6379", "must be a URL such as redis://127.0.0.1:6379"),
    ("http://h:1", "scheme http:// is not a store"),
    ("redis://", "a host is missing"),
    ("redis://h:0", "port 0 is not in 1..65535"),
    ("redis://h:70000", "port 70000 is not in 1..65535"),
    ("redis://h:x", '"h:x" is not a host name or address'),
    ("redis://h1,h2", "redis:// takes one host; for several masters use redlock://"),
    ("redis://h/abc", 'database must be a number from 0 to 9999, not "abc"'),
    ("redis://h/10000", 'database must be a number from 0 to 9999, not "10000"'),
    ("redis://h/1/2", "the path is the database number only"),
    ("redis://h?tls=1", "takes no query or fragment"),
    ("redis://%zz@h", "the user info is not valid percent-encoding"),
    ("redis+sentinel://s1,s2/m", "redis+sentinel:// is not supported by the Python client"),
    ("redis+cluster://n1,n2", "redis+cluster:// is not supported by the Python client"),
    ("redlock://h1,h2", "needs at least 3 independent masters (5 is usual), not 2"),
    ("redlock://h1,H1:6379,h3", "master h1:6379 is named twice; Redlock's majority needs distinct masters"),
    ("redlock://h1,,h3", "a host is missing"),
    ("redis://h\n", '"" is not a host name or address'),
]


@pytest.mark.parametrize(("url", "says"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_refused_url_names_the_option_and_the_url(url: str, says: str) -> None:
    with pytest.raises(StoreUrlError) as e:
        parse_store_url(url, "--store")
    message = str(e.value)
    assert message.startswith("--store: ")
    assert says in message
    assert message.endswith(f", got {json.dumps(url)}")
    assert isinstance(e.value, ValueError)


def test_a_refused_url_never_shows_its_password() -> None:
    with pytest.raises(StoreUrlError) as e:
        parse_store_url("redis://u:hunter2@h:99999", "store")
    assert str(e.value) == 'store: port 99999 is not in 1..65535, got "redis://u:***@h:99999"'
    assert redact("redlock://:hunter2@a,b,c") == "redlock://:***@a,b,c"
    assert redact("redis://h:1") == "redis://h:1"
