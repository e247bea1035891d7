// The shared conformance vectors (clients/conformance) hold of the reference implementation: every
// token vector against parseToken, every SQL statement against the SQL guard's builders, every
// API response against the agent's OpenAPI document and problem table, and every file that
// hack/gen-protocol.ts generates (the Lua constants and wire names of TypeScript, the chart and the
// Go, Python and Java clients) is current. The guard outcome vectors
// need a real Redis and PostgreSQL: test/integration/guards/conformance.test.ts.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { PROBLEMS, type ProblemType } from '../../../src/agent/problem.ts';
import { FENCED_WRITE_LUA } from '../../../src/guards/redis-fenced-write-lua.ts';
import {
  fenceTableSql,
  lockAdvanceSql,
  lockFencedDeleteSql,
  lockFencedUpdateSql,
  lockFencedUpsertSql,
  SqlIdentifierError,
} from '../../../src/guards/sql-guard.ts';
import { MAX_TOKEN, parseToken, TokenError } from '../../../src/protocol/token.ts';
import { GENERATED, readLua } from '../../../hack/gen-protocol.ts';
import { CRD_TYPES_FILE } from '../../../hack/gen-crd-types.ts';
import { FENCE_NEXT_FUNCTION_LUA } from '../../../src/fencing/redis-fence.ts';
import { ACQUIRE_LUA, RELEASE_LUA, RENEW_LUA } from '../../../src/stores/redis/scripts.ts';
import { lockKeys } from '../../../src/stores/redis/keys.ts';
import { driftMs, renewPeriodMs, MAX_TTL_MS, MIN_TTL_MS, DEFAULT_TTL_MS } from '../../../src/stores/redis/timing.ts';
import { REDLOCK_ACQUIRE_LUA, REDLOCK_RAISE_LUA } from '../../../src/stores/redlock/scripts.ts';
import { isDnsLabel } from '../../../src/protocol/names.ts';
import {
  readVectors,
  type ApiVectors,
  type SqlStatementVectors,
  type StoreVectors,
  type TokenVectors,
} from '../../support/conformance.ts';

const root = resolve(import.meta.dirname, '../../..');
const tokens = readVectors<TokenVectors>('tokens.json');
const sql = readVectors<SqlStatementVectors>('sql-statements.json');
const api = readVectors<ApiVectors>('api-responses.json');
const store = readVectors<StoreVectors>('store.json');

describe('the shared Lua scripts', () => {
  // Every file the generator writes: the TypeScript Lua constants, the chart's wire names, and the
  // Go, Python and Java clients' constants and composed scripts (`node hack/gen-protocol.ts --check`
  // is the same check from a shell). The CRD's TypeScript shapes: test/unit/api/crd-drift.test.ts.
  it.each(GENERATED.filter((g) => g.path !== CRD_TYPES_FILE).map((g) => [g.path, g] as const))(
    '%s is what hack/gen-protocol.ts writes (run node hack/gen-protocol.ts after changing the protocol)',
    (path, g) => {
      expect(readFileSync(resolve(root, path), 'utf8')).toBe(g.text());
    },
  );
  it('the guard runs redis-fenced-write.lua as it is', () => {
    expect(FENCED_WRITE_LUA).toBe(readLua('redis-fenced-write.lua'));
  });
  it('the stores run the scripts store.json composes, byte for byte', () => {
    const compose = (files: readonly string[]) => files.map((f) => readLua(f)).join('');
    expect(ACQUIRE_LUA).toBe(compose(store.scripts.acquire));
    expect(RENEW_LUA).toBe(compose(store.scripts.renew));
    expect(RELEASE_LUA).toBe(compose(store.scripts.release));
    expect(REDLOCK_ACQUIRE_LUA).toBe(compose(store.scripts.redlockAcquire));
    expect(REDLOCK_RAISE_LUA).toBe(compose(store.scripts.redlockRaise));
    expect(FENCE_NEXT_FUNCTION_LUA).toBe(compose(store.scripts.fenceNext));
  });
});

describe('store vectors against the lock stores', () => {
  it.each(store.keys.vectors.map((v) => [`${v.namespace}/${v.name}`, v] as const))('keys of %s', (_n, v) => {
    expect(lockKeys(v.namespace, v.name)).toEqual({
      holder: v.holder,
      counter: v.counter,
      epoch: v.epoch,
      channel: v.channel,
    });
  });
  it.each(store.keys.invalid.map((n) => [JSON.stringify(n), n] as const))(
    '%s is no lock or namespace name',
    (_n, n) => {
      expect(isDnsLabel(n)).toBe(false);
    },
  );
  it('TTL bounds and timing vectors', () => {
    expect([store.timing.ttlMs.min, store.timing.ttlMs.max, store.timing.ttlMs.default]).toEqual([
      MIN_TTL_MS,
      MAX_TTL_MS,
      DEFAULT_TTL_MS,
    ]);
    for (const v of store.timing.vectors) {
      expect([driftMs(v.ttlMs), renewPeriodMs(v.ttlMs)]).toEqual([v.driftMs, v.renewEveryMs]);
    }
  });
});

describe('token vectors against parseToken', () => {
  it('maxToken is MAX_TOKEN (2^63 - 1)', () => {
    expect(BigInt(tokens.maxToken)).toBe(MAX_TOKEN);
  });
  it.each(tokens.parse.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    if (c.valid) {
      expect(parseToken(c.input).toString()).toBe(c.value);
    } else {
      expect(() => parseToken(c.input)).toThrow(TokenError);
    }
  });
  it.each(tokens.compare.map((c) => [`${c.a} vs ${c.b}`, c] as const))('compare %s', (_name, c) => {
    const a = parseToken(c.a);
    const b = parseToken(c.b);
    expect(a < b ? -1 : a > b ? 1 : 0).toBe(c.order);
  });
});

describe('SQL statement vectors against the SQL guard builders', () => {
  it.each(sql.valid.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    expect(fenceTableSql(c.spec)).toBe(c.fenceTable);
    expect(lockFencedUpdateSql(c.spec)).toBe(c.update);
    expect(lockFencedUpsertSql(c.spec)).toBe(c.upsert);
    expect(lockFencedDeleteSql(c.spec)).toBe(c.delete);
    expect(lockAdvanceSql(c.spec)).toBe(c.advance);
  });
  it.each(sql.invalid.map((c) => [c.name, c] as const))('refuses %s', (_name, c) => {
    expect(() => lockFencedUpdateSql(c.spec)).toThrow(c.spec.lock === '' ? RangeError : SqlIdentifierError);
  });
});

describe('API response vectors against the OpenAPI document and the problem table', () => {
  const doc = JSON.parse(readFileSync(resolve(root, 'src/agent/openapi.json'), 'utf8')) as { components: object };
  const ajv = new Ajv2020({ strict: true, allErrors: true, validateFormats: false });
  ajv.addKeyword('components');
  ajv.addSchema({ $id: 'agent-api.json', components: doc.components }, 'agent-api.json');
  const schema = (name: string) => ajv.getSchema(`agent-api.json#/components/schemas/${name}`);
  /** acceptable: valid by the schema and every token parses (the schema's pattern is looser: "042"). */
  const acceptable = (name: string, body: unknown): boolean => {
    const validate = schema(name);
    if (validate === undefined) throw new Error(`no schema ${name}`);
    if (!validate(body)) return false;
    const token = (body as { token?: unknown }).token;
    try {
      if (token !== undefined) parseToken(token);
      return true;
    } catch {
      return false;
    }
  };

  it.each(api.snapshots.map((c) => [c.name, c] as const))('snapshot: %s', (_name, c) => {
    expect(acceptable('LockSnapshot', c.body)).toBe(c.valid);
    if (!c.valid) return;
    const body = c.body as { token?: string; held: boolean };
    expect(body.token).toBe(c.token);
    expect(body.held).toBe(c.held);
  });
  it.each(api.events.map((c) => [c.name, c] as const))('event: %s', (_name, c) => {
    expect(acceptable('LockEvent', c.body)).toBe(c.valid);
    if (c.valid) expect((c.body as { type: string; token: string }).type).toBe(c.event);
  });
  const errorOf: Partial<Record<ProblemType, string>> = {
    'not-granted': 'not-acquired',
    held: 'not-acquired',
    'already-done': 'already-done',
    'not-held': 'lost',
  };
  it.each(api.problems.map((c) => [c.name, c] as const))('problem: %s', (_name, c) => {
    const type = c.body.type.replace('https://fencepost.io/problems/', '') as ProblemType;
    expect(PROBLEMS[type]).toEqual({ status: c.status, title: c.body.title });
    expect(c.body.status).toBe(c.status);
    expect(acceptable('Problem', c.body)).toBe(true);
    expect(errorOf[type] ?? 'other').toBe(c.error);
  });
});
