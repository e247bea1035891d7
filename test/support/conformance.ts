/**
 * The shared conformance vectors of clients/conformance (read by the Go, Python and Java clients'
 * test suites too), typed for the TypeScript tests that prove them true of the reference code.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

/** CONFORMANCE_DIR is clients/conformance. */
export const CONFORMANCE_DIR = resolve(import.meta.dirname, '../../clients/conformance');

/** readVectors parses one vector file of CONFORMANCE_DIR. */
export function readVectors<T>(file: string): T {
  return JSON.parse(readFileSync(resolve(CONFORMANCE_DIR, file), 'utf8')) as T;
}

/** TokenVectors is tokens.json. */
export interface TokenVectors {
  readonly maxToken: string;
  readonly parse: readonly { name: string; input: unknown; valid: boolean; value?: string }[];
  readonly compare: readonly { a: string; b: string; order: -1 | 0 | 1 }[];
}

/** SqlStatementVectors is sql-statements.json. */
export interface SqlStatementVectors {
  readonly valid: readonly {
    name: string;
    spec: {
      table: string;
      schema?: string;
      idColumn: string;
      setColumns: string[];
      lock: string;
      fenceTable?: string;
      fenceSchema?: string;
    };
    fenceTable: string;
    update: string;
    upsert: string;
    delete: string;
    advance: string;
  }[];
  readonly invalid: readonly {
    name: string;
    spec: { table: string; idColumn: string; setColumns: string[]; lock: string; fenceTable?: string };
  }[];
}

/** ApiVectors is api-responses.json. */
export interface ApiVectors {
  readonly snapshots: readonly { name: string; body: unknown; valid: boolean; token?: string; held?: boolean }[];
  readonly events: readonly { name: string; event: string; body: unknown; valid: boolean; token?: string }[];
  readonly problems: readonly {
    name: string;
    status: number;
    body: { type: string; title: string; status: number; detail: string } & Record<string, unknown>;
    error: 'not-acquired' | 'already-done' | 'lost' | 'other';
  }[];
}

/** RedisStep is one step of a Redis guard case. */
export type RedisStep =
  | {
      op: 'write';
      key: string;
      token: string;
      value: string;
      writeId?: string;
      expect: 'applied' | 'duplicate' | 'stale' | 'token-error';
      mark?: string;
    }
  | { op: 'delete'; key: string; token: string; expect: 'applied' | 'stale'; mark: string }
  | { op: 'advance'; token: string; expect: 'applied' | 'stale'; mark: string }
  | { op: 'get'; key: string; value: string | null };

/** SqlStep is one step of a SQL guard case. */
export type SqlStep =
  | {
      op: 'write' | 'upsert' | 'delete';
      id: number;
      token: string;
      values?: string[];
      expect: 'accepted' | 'stale' | 'not-found' | 'token-error';
    }
  | { op: 'advance'; token: string; expect: 'accepted' | 'stale' }
  | { op: 'read'; id: number; values: string[] | null };

/** GuardVectors is guard-outcomes.json. */
export interface GuardVectors {
  readonly redis: readonly { name: string; steps: readonly RedisStep[] }[];
  readonly sql: readonly { name: string; steps: readonly SqlStep[] }[];
}

/** StoreVectors is store.json: the lock stores' keys, script compositions, token and timing rules. */
export interface StoreVectors {
  readonly keys: {
    readonly vectors: readonly {
      namespace: string;
      name: string;
      counter: string;
      holder: string;
      epoch: string;
      channel: string;
    }[];
    readonly invalid: readonly string[];
  };
  readonly scripts: {
    readonly acquire: readonly string[];
    readonly renew: readonly string[];
    readonly release: readonly string[];
    readonly redlockAcquire: readonly string[];
    readonly redlockRaise: readonly string[];
    readonly fenceNext: readonly string[];
  };
  readonly timing: {
    readonly ttlMs: { readonly min: number; readonly max: number; readonly default: number };
    readonly vectors: readonly { ttlMs: number; driftMs: number; renewEveryMs: number }[];
  };
}
