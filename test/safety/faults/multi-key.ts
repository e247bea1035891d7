/**
 * multi-key: the trial's workers run the multi-key workload (test/safety/multi-key-worker.ts) —
 * writes AND deletes over a shared set of keys through the Redis guard with one mark per lock,
 * `advance(token)` at the start of each term — under one of the usual faults on the holder, drawn
 * at random: `pause`, `partition`, `store-delay` or `kill`.
 *
 * The check is lock-wide and per key: no SET or DEL with a token older than one already applied
 * to ANY key of the lock may be applied (a stale holder writing a key the newer holder never
 * touched, or bringing back one it deleted, is the hazard of one mark per key), every
 * acknowledged op is in the store's command log, and each key's final content is what the last
 * applied op on it left (its value, or nothing after a DEL). Counters: `staleOnOtherKey` (an
 * applied op below the lock's newest token, on a key that token never touched), `resurrected` (a
 * SET below the newest token on a key whose last op was a newer DEL), `deletesApplied`.
 *
 * Calibration `key-scope`: the workers' guard as it was before the lock-wide mark — one mark per
 * data key, no `advance`, deletes as plain DELs — and the inner fault is `pause` or `store-delay`;
 * the checker must then report S3 and count `staleOnOtherKey` (and `resurrected` when it happens).
 */
import type { Redis } from 'ioredis';
import { checkHistory, type TrialReport, type Violation } from '../checker.ts';
import { parseStoreValue, storeValue, type StoreApply, type TrialHistory } from '../history.ts';
import { trialPrefix } from '../recorders.ts';
import type { Ctx, FaultOutcome, Holder } from '../trial.ts';
import type { WorkerHandle } from '../workers.ts';

/** INNER_FAULTS: the usual faults a multi-key trial draws from. */
export const INNER_FAULTS = ['pause', 'partition', 'store-delay', 'kill'] as const;
type Inner = (typeof INNER_FAULTS)[number];
type InnerScript = (ctx: Ctx, h: Holder, other: WorkerHandle) => Promise<FaultOutcome>;

/** multiKey draws one of the usual faults and runs it on the multi-key workload (trial.ts joins with it). */
export async function multiKey(
  ctx: Ctx,
  h: Holder,
  other: WorkerHandle,
  scripts: Readonly<Record<Inner, InnerScript>>,
): Promise<FaultOutcome> {
  // Calibrating, only the faults after which a stale holder acts (a kill or a partition ends its
  // writes by its own deadline), so that few trials show the weaker guard.
  const inner = ctx.pick(ctx.spec.calibrate === 'key-scope' ? (['pause', 'store-delay'] as const) : INNER_FAULTS);
  const o = await scripts[inner](ctx, h, other);
  return { ...o, variant: `${inner}/${o.variant}` };
}

/** readFinalKeys reads a multi-key trial's shared keys: key → value. */
export async function readFinalKeys(client: Redis, trial: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${trialPrefix(trial)}k:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) {
      const values = await client.mget(...keys);
      keys.forEach((k, i) => {
        const v = values[i];
        if (v !== null && v !== undefined) out.set(k, v);
      });
    }
  } while (cursor !== '0');
  return out;
}

/** MultiKeyCounters: what the multi-key check counts besides the invariants. */
export interface MultiKeyCounters {
  staleOnOtherKey: number;
  resurrected: number;
  deletesApplied: number;
}

/**
 * checkMultiKey is checkHistory for a multi-key trial (pure). The store log's order (S2/S3) is
 * checked lock-wide by checkHistory itself over every SET and DEL; its S4 becomes "every
 * acknowledged op was applied" (a later op may overwrite or delete a key), and the final content
 * is checked per key here.
 */
export function checkMultiKey(
  h: TrialHistory,
  finalKeys: ReadonlyMap<string, string>,
): { report: TrialReport; counters: MultiKeyCounters } {
  const applied = new Map(h.store.map((a) => [a.writeId, storeValue(a.writeId, a.token, a.writer)]));
  const base = checkHistory({ ...h, finalStore: applied });
  const extra: Violation[] = [];
  const counters: MultiKeyCounters = { staleOnOtherKey: 0, resurrected: 0, deletesApplied: 0 };
  const last = new Map<string, StoreApply>();
  const newestOnKey = new Map<string, bigint>();
  let newest: bigint | undefined;
  for (const a of h.store) {
    const key = a.key ?? '';
    if (a.op === 'del') counters.deletesApplied++;
    if (newest !== undefined && a.token < newest) {
      const onKey = newestOnKey.get(key);
      if (onKey === undefined || onKey <= a.token) counters.staleOnOtherKey++;
      const before = last.get(key);
      if (a.op === 'set' && before?.op === 'del' && before.token > a.token) counters.resurrected++;
    }
    if (newest === undefined || a.token > newest) newest = a.token;
    if ((newestOnKey.get(key) ?? -1n) < a.token) newestOnKey.set(key, a.token);
    last.set(key, a);
  }
  for (const key of new Set([...last.keys(), ...finalKeys.keys()])) {
    const op = last.get(key);
    const want = op === undefined || op.op === 'del' ? undefined : storeValue(op.writeId, op.token, op.writer);
    const got = finalKeys.get(key);
    if (got !== want) {
      const was = got !== undefined ? parseStoreValue(got) : undefined;
      extra.push({
        invariant: 'S4',
        message: `key ${key} holds ${got === undefined ? 'nothing' : `${was?.writeId ?? JSON.stringify(got)}`} but the last op the store applied on it was ${op === undefined ? 'none' : `${op.op === 'del' ? 'DEL' : 'SET'} ${op.writeId} (${op.writer}#${op.token})`}`,
      });
    }
  }
  // Name the key and the op in the lock-wide order findings (checkHistory knows only write ids).
  const byId = new Map(h.store.map((a) => [a.writeId, a]));
  const named = base.violations.map((v) => {
    const id = /store applied write (\S+)/.exec(v.message)?.[1];
    const a = id !== undefined ? byId.get(id) : undefined;
    return a?.key !== undefined ? { ...v, message: `${v.message} [${a.op === 'del' ? 'DEL' : 'SET'} ${a.key}]` } : v;
  });
  const violations = [...named, ...extra];
  return { report: { ...base, ok: violations.length === 0, violations }, counters: { ...counters } };
}
