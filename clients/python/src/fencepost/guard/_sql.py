"""The SQL fenced update for PostgreSQL, one mark per lock: the statements of src/guards/sql-guard.ts
(lockFenced*Sql), byte for byte, run through psycopg 3 with PostgreSQL's own $n placeholders
(psycopg's RawCursor)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._errors import FencepostError
from .._token import check_token
from ._outcome import Outcome

if TYPE_CHECKING:
    import psycopg

DEFAULT_FENCE_TABLE = "fencepost_fences"
"""DEFAULT_FENCE_TABLE is the table that holds one mark per lock."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_MAX_IDENTIFIER = 63  # PostgreSQL silently truncates longer names (NAMEDATALEN - 1)


class IdentifierError(FencepostError, ValueError):
    """IdentifierError says which name was refused: names are never escaped, only refused."""


def _quote(name: str, what: str) -> str:
    if not isinstance(name, str) or _IDENTIFIER.fullmatch(name) is None:
        raise IdentifierError(f"{what} {name!r} is not an identifier of the form [A-Za-z_][A-Za-z0-9_]*")
    if len(name) > _MAX_IDENTIFIER:
        raise IdentifierError(f"{what} {name!r} is longer than {_MAX_IDENTIFIER} characters")
    return f'"{name}"'


def _qualified(schema: str | None, name: str, schema_what: str, name_what: str) -> str:
    q = _quote(name, name_what)
    return q if not schema else f"{_quote(schema, schema_what)}.{q}"


def fence_table_sql(fence_table: str | None = None, fence_schema: str | None = None) -> str:
    """fence_table_sql is ``CREATE TABLE IF NOT EXISTS "fencepost_fences" (...)``: run it once, as a
    migration, before the first write. Never delete its rows: a lost mark lets every stale holder
    in again once."""
    t = _qualified(fence_schema, fence_table or DEFAULT_FENCE_TABLE, "fence_schema", "fence_table")
    return (
        f'CREATE TABLE IF NOT EXISTS {t} ("lock" text PRIMARY KEY, '
        '"token" bigint NOT NULL CHECK ("token" >= 0))'
    )


@dataclass(frozen=True, slots=True)
class SQLSpec:
    """SQLSpec names the data table and columns of a lock-scoped fenced write, the lock, and the
    fence table. The data table needs no fence column."""

    table: str
    """table is the data table (unqualified); schema qualifies it when set."""
    id_column: str
    """id_column identifies the row (for upsert: a primary key or unique column)."""
    set_columns: Sequence[str]
    """set_columns are the columns a write sets, in the order of its values (at least one)."""
    lock: str
    """lock names the lock whose tokens the writes carry (one row of the fence table); tables
    written under one lock share its mark."""
    schema: str | None = None
    fence_table: str | None = None
    fence_schema: str | None = None


@dataclass(frozen=True, slots=True)
class Statements:
    """Statements are a spec's statements. Parameters: update and upsert $1..$n the values, $n+1
    the token, $n+2 the id, $n+3 the lock; delete $1 token, $2 id, $3 lock; advance $1 token,
    $2 lock. Each returns one row per step done: none (stale), 'fenced' (the mark was raised),
    then 'written' (the data was changed)."""

    update: str
    upsert: str
    delete: str
    advance: str


_STEPS = "SELECT 'fenced' AS step FROM fence UNION ALL SELECT 'written' FROM w"


def _fence_step(fence: str, token: str, lock: str) -> str:
    return (
        f'WITH fence AS (INSERT INTO {fence} ("lock", "token") VALUES ({lock}, {token}) '
        f'ON CONFLICT ("lock") DO UPDATE SET "token" = EXCLUDED."token" '
        f'WHERE {fence}."token" <= EXCLUDED."token" RETURNING 1)'
    )


def build_statements(spec: SQLSpec) -> Statements:
    """build_statements checks every name of ``spec`` (IdentifierError for a bad one; ValueError
    for an empty lock) and builds the statements: the same text as the TypeScript guard's."""
    table = _qualified(spec.schema, spec.table, "schema", "table")
    ident = _quote(spec.id_column, "id_column")
    if isinstance(spec.set_columns, str) or len(spec.set_columns) == 0:
        raise IdentifierError("set_columns must name at least one column")
    seen = {spec.id_column}
    cols: list[str] = []
    for i, c in enumerate(spec.set_columns):
        cols.append(_quote(c, f"set_columns[{i}]"))
        if c in seen:
            raise IdentifierError(f"column {c!r} appears twice among id_column and set_columns")
        seen.add(c)
    if not spec.lock:
        raise ValueError("fencepost guard: lock must not be empty")
    fence = _qualified(
        spec.fence_schema, spec.fence_table or DEFAULT_FENCE_TABLE, "fence_schema", "fence_table"
    )
    n = len(cols)
    assign = ", ".join(f"{c} = ${i + 1}" for i, c in enumerate(cols))
    values = ", ".join([f"${i + 1}" for i in range(n)] + [f"${n + 2}"])
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in cols)
    columns = ", ".join([*cols, ident])
    head = _fence_step(fence, f"${n + 1}", f"${n + 3}")
    return Statements(
        update=f"{head}, w AS (UPDATE {table} SET {assign} WHERE {ident} = ${n + 2} "
        f"AND EXISTS (SELECT 1 FROM fence) RETURNING 1) {_STEPS}",
        upsert=f"{head}, w AS (INSERT INTO {table} ({columns}) SELECT {values} WHERE EXISTS "
        f"(SELECT 1 FROM fence) ON CONFLICT ({ident}) DO UPDATE SET {updates} RETURNING 1) {_STEPS}",
        delete=f"{_fence_step(fence, '$1', '$3')}, w AS (DELETE FROM {table} WHERE {ident} = $2 "
        f"AND EXISTS (SELECT 1 FROM fence) RETURNING 1) {_STEPS}",
        advance=f"{_fence_step(fence, '$1', '$2')} SELECT 'fenced' AS step FROM fence",
    )


def _outcome(rows: int, missing: Outcome) -> Outcome:
    """_outcome reads the steps: 0 rows stale, 1 fenced only (missing), 2 fenced and written."""
    if rows == 0:
        return Outcome.STALE
    return missing if rows == 1 else Outcome.APPLIED


@dataclass(frozen=True, slots=True)
class _Bound:
    spec: SQLSpec
    stmts: Statements = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stmts", build_statements(self.spec))

    def params(self, id: object, token: int, values: Sequence[object]) -> list[Any]:
        if len(values) != len(self.spec.set_columns):
            raise ValueError(
                f"fencepost guard: {len(values)} values for {len(self.spec.set_columns)} set_columns"
            )
        return [*values, check_token(token), id, self.spec.lock]


class SQLGuard:
    """SQLGuard runs fenced writes against one table under one lock's mark, on a psycopg 3
    connection (PostgreSQL). Create the fence table first (fence_table_sql()).

    Each call is one statement on ``conn`` as it is: in autocommit mode it commits at once;
    otherwise it joins the connection's transaction, and the fence row stays locked — other
    holders wait — until you commit. The token is bound as a Python int (exact: a bigint)."""

    def __init__(self, conn: psycopg.Connection[Any], spec: SQLSpec) -> None:
        """The statements are built once: a bad name raises IdentifierError here."""
        self._conn = conn
        self._b = _Bound(spec)

    @property
    def statements(self) -> Statements:
        """statements are the statements the guard runs."""
        return self._b.stmts

    def update(self, id: object, token: int, *values: object) -> Outcome:
        """update sets the row ``id``'s columns to ``values`` (in set_columns order) if ``token`` is not
        below the lock's mark, raising the mark: APPLIED, STALE (nothing changed) or NOT_FOUND (no
        such row; the mark was raised)."""
        return _outcome(
            self._rows(self._b.stmts.update, self._b.params(id, token, values)), Outcome.NOT_FOUND
        )

    def upsert(self, id: object, token: int, *values: object) -> Outcome:
        """upsert is update that inserts the row when it does not exist (a stale token inserts nothing)."""
        return _outcome(
            self._rows(self._b.stmts.upsert, self._b.params(id, token, values)), Outcome.NOT_FOUND
        )

    def delete(self, id: object, token: int) -> Outcome:
        """delete removes the row ``id`` under the same rule; a missing row with a current token is
        APPLIED. The mark stays, so a stale holder cannot bring the row back."""
        rows = self._rows(self._b.stmts.delete, [check_token(token), id, self._b.spec.lock])
        return _outcome(rows, Outcome.APPLIED)

    def advance(self, token: int) -> Outcome:
        """advance raises the lock's mark to ``token`` without writing data: a new holder that calls
        it first fences out every older token at once."""
        rows = self._rows(self._b.stmts.advance, [check_token(token), self._b.spec.lock])
        return Outcome.APPLIED if rows > 0 else Outcome.STALE

    def _rows(self, stmt: str, params: list[Any]) -> int:
        import psycopg  # noqa: PLC0415 -- optional: only this guard needs it

        with psycopg.RawCursor(self._conn) as cur:
            cur.execute(stmt, params)
            return len(cur.fetchall())


class AsyncSQLGuard:
    """AsyncSQLGuard is SQLGuard on a psycopg AsyncConnection: the same statements and rules."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], spec: SQLSpec) -> None:
        """See SQLGuard."""
        self._conn = conn
        self._b = _Bound(spec)

    @property
    def statements(self) -> Statements:
        """statements are the statements the guard runs."""
        return self._b.stmts

    async def update(self, id: object, token: int, *values: object) -> Outcome:
        """update: see SQLGuard.update."""
        rows = await self._rows(self._b.stmts.update, self._b.params(id, token, values))
        return _outcome(rows, Outcome.NOT_FOUND)

    async def upsert(self, id: object, token: int, *values: object) -> Outcome:
        """upsert: see SQLGuard.upsert."""
        rows = await self._rows(self._b.stmts.upsert, self._b.params(id, token, values))
        return _outcome(rows, Outcome.NOT_FOUND)

    async def delete(self, id: object, token: int) -> Outcome:
        """delete: see SQLGuard.delete."""
        rows = await self._rows(self._b.stmts.delete, [check_token(token), id, self._b.spec.lock])
        return _outcome(rows, Outcome.APPLIED)

    async def advance(self, token: int) -> Outcome:
        """advance: see SQLGuard.advance."""
        rows = await self._rows(self._b.stmts.advance, [check_token(token), self._b.spec.lock])
        return Outcome.APPLIED if rows > 0 else Outcome.STALE

    async def _rows(self, stmt: str, params: list[Any]) -> int:
        import psycopg  # noqa: PLC0415 -- optional: only this guard needs it

        async with psycopg.AsyncRawCursor(self._conn) as cur:
            await cur.execute(stmt, params)
            return len(await cur.fetchall())
