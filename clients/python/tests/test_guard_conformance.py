"""The guards' conformance without servers: the shared Lua script, byte for byte, and the SQL
statement vectors (clients/conformance/sql-statements.json)."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import CONFORMANCE, vectors
from fencepost.guard import (
    IdentifierError,
    SQLSpec,
    Statements,
    build_statements,
    fence_table_sql,
    fenced_write_lua,
)


def test_the_guard_runs_the_shared_script_byte_for_byte() -> None:
    assert fenced_write_lua().encode() == (CONFORMANCE / "redis-fenced-write.lua").read_bytes()


def spec(s: dict[str, Any]) -> SQLSpec:
    return SQLSpec(
        table=s["table"],
        id_column=s["idColumn"],
        set_columns=s["setColumns"],
        lock=s["lock"],
        schema=s.get("schema"),
        fence_table=s.get("fenceTable"),
        fence_schema=s.get("fenceSchema"),
    )


V = vectors("sql-statements.json")


@pytest.mark.parametrize("case", V["valid"], ids=[c["name"] for c in V["valid"]])
def test_sql_statement_vectors(case: dict[str, Any]) -> None:
    s = spec(case["spec"])
    assert build_statements(s) == Statements(
        update=case["update"], upsert=case["upsert"], delete=case["delete"], advance=case["advance"]
    )
    assert fence_table_sql(s.fence_table, s.fence_schema) == case["fenceTable"]


@pytest.mark.parametrize("case", V["invalid"], ids=[c["name"] for c in V["invalid"]])
def test_sql_specs_every_client_refuses(case: dict[str, Any]) -> None:
    s = spec(case["spec"])
    with pytest.raises(IdentifierError if s.lock else ValueError):
        build_statements(s)
