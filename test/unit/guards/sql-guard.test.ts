import { describe, expect, it } from 'vitest';
import {
  fencedParams,
  fencedUpdateSql,
  fencedUpsertSql,
  quoteIdentifier,
  SqlIdentifierError,
  tokenParam,
  type FencedSqlSpec,
} from '../../../src/guards/sql-guard.ts';
import { TokenError } from '../../../src/protocol/token.ts';

const spec: FencedSqlSpec = { table: 't', idColumn: 'id', fenceColumn: 'fence', setColumns: ['a'] };

describe('fencedUpdateSql', () => {
  it('generates the fenced UPDATE with the token bound once and compared with <=', () => {
    expect(fencedUpdateSql(spec)).toBe('UPDATE "t" SET "a" = $1, "fence" = $2 WHERE "id" = $3 AND "fence" <= $2');
  });

  it('numbers several set columns in order, then the token, then the id; qualifies the schema', () => {
    expect(
      fencedUpdateSql({
        schema: 'app',
        table: 'Orders',
        idColumn: 'order_id',
        fenceColumn: 'fence_token',
        setColumns: ['status', 'amount', '_note'],
      }),
    ).toBe(
      'UPDATE "app"."Orders" SET "status" = $1, "amount" = $2, "_note" = $3, "fence_token" = $4 WHERE "order_id" = $5 AND "fence_token" <= $4',
    );
  });

  it('quotes reserved words instead of refusing them', () => {
    expect(fencedUpdateSql({ table: 'user', idColumn: 'select', fenceColumn: 'order', setColumns: ['from'] })).toBe(
      'UPDATE "user" SET "from" = $1, "order" = $2 WHERE "select" = $3 AND "order" <= $2',
    );
  });
});

describe('fencedUpsertSql', () => {
  it("generates INSERT ... ON CONFLICT DO UPDATE guarded by the existing row's fence", () => {
    expect(fencedUpsertSql(spec)).toBe(
      'INSERT INTO "t" ("a", "fence", "id") VALUES ($1, $2, $3) ON CONFLICT ("id") DO UPDATE SET "a" = EXCLUDED."a", "fence" = EXCLUDED."fence" WHERE "t"."fence" <= EXCLUDED."fence"',
    );
  });

  it('uses the same parameter order as the UPDATE and the qualified name in the WHERE', () => {
    expect(fencedUpsertSql({ schema: 's', table: 'kv', idColumn: 'k', fenceColumn: 'f', setColumns: ['v', 'w'] })).toBe(
      'INSERT INTO "s"."kv" ("v", "w", "f", "k") VALUES ($1, $2, $3, $4) ON CONFLICT ("k") DO UPDATE SET "v" = EXCLUDED."v", "w" = EXCLUDED."w", "f" = EXCLUDED."f" WHERE "s"."kv"."f" <= EXCLUDED."f"',
    );
  });
});

describe('identifier validation', () => {
  const bad = [
    '',
    '1a',
    'a b',
    'a"b',
    'a;DROP TABLE t',
    't.x',
    '"t"',
    'a-b',
    'ä',
    'a\u0000',
    ' a',
    'a\n',
    'x'.repeat(64),
  ];

  it('refuses anything but [A-Za-z_][A-Za-z0-9_]* of at most 63 characters, naming the field and the value', () => {
    for (const name of bad) {
      for (const field of ['table', 'schema', 'idColumn', 'fenceColumn'] as const) {
        const s = { ...spec, [field]: name };
        for (const gen of [fencedUpdateSql, fencedUpsertSql]) {
          let err: unknown;
          try {
            gen(s);
          } catch (e) {
            err = e;
          }
          expect(err, `${field}=${JSON.stringify(name)}`).toBeInstanceOf(SqlIdentifierError);
          expect((err as Error).message).toContain(field);
          expect((err as Error).message).toContain(JSON.stringify(name.slice(0, 80)));
        }
      }
      expect(() => fencedUpdateSql({ ...spec, setColumns: ['ok', name] })).toThrow(/setColumns\[1\]/);
    }
  });

  it('accepts the boundary cases', () => {
    expect(quoteIdentifier('_')).toBe('"_"');
    expect(quoteIdentifier('A9_z')).toBe('"A9_z"');
    expect(quoteIdentifier('x'.repeat(63))).toBe(`"${'x'.repeat(63)}"`);
  });

  it('refuses non-strings, empty setColumns and a column named twice', () => {
    expect(() => quoteIdentifier(42, 'table')).toThrow(/table must be a string/);
    expect(() => fencedUpdateSql({ ...spec, setColumns: [] })).toThrow(/at least one column/);
    expect(() => fencedUpdateSql({ ...spec, setColumns: ['fence'] })).toThrow(/appears twice/);
    expect(() => fencedUpsertSql({ ...spec, setColumns: ['a', 'a'] })).toThrow(/appears twice/);
    expect(() => fencedUpdateSql({ ...spec, fenceColumn: 'id' })).toThrow(/appears twice/);
  });
});

describe('parameters', () => {
  it('binds the token as its exact decimal string, after the set values and before the id', () => {
    expect(fencedParams(spec, ['x'], 9007199254740993n, 42)).toEqual(['x', '9007199254740993', 42]);
    expect(fencedParams(spec, ['x'], '9223372036854775807', 'row')).toEqual(['x', '9223372036854775807', 'row']);
    expect(tokenParam(0n)).toBe('0');
  });

  it('refuses malformed tokens and a wrong number of values', () => {
    for (const bad of ['', '-1', '01', '1e3', '0x10', '1.5', ' 1', 'NaN', '9223372036854775808']) {
      expect(() => tokenParam(bad), bad).toThrow(TokenError);
    }
    expect(() => tokenParam(-1n)).toThrow(TokenError);
    expect(() => fencedParams(spec, ['x', 'y'], 1n, 1)).toThrow(/2 values for 1 setColumns/);
  });
});
