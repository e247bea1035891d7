/**
 * The verdict on one store-lock trial (test/safety/stores/), pure:
 * - S3, the store's order: the values the data key was set to, in the order Redis applied them
 *   (read from MONITOR, so from the store's side, not from the workers' replies), carry tokens
 *   that never go down. A stale holder's write applied after a newer token's write breaks it.
 * - Overlaps: windows in which two workers believed they held the lock (granted … lost, released
 *   or the end). Expected under pauses and data loss — a lock alone cannot prevent them (the
 *   issue says so): they are counted and reported, never a violation. The guard is what makes
 *   them harmless, and S3 checks that it did.
 * - Reported beside them, not violations: `sharedTokens`, applied writes whose token equals the
 *   highest applied so far but came from another worker (two holders were handed one token — a
 *   failover to a replica that had missed exactly one grant does that — and the guard, which
 *   refuses only tokens *below* its mark, accepts both); of them `interleavedSharedTokens`, those
 *   from a writer that had already written that token before the other did (both holders of
 *   one token writing in turn: the guard cannot tell their writes apart); `grantRegressions`, grants whose token is
 *   not above that of a grant reported before this one was asked for, or equal to any earlier
 *   grant's (the counter went back: data loss, a failover, a failback).
 */

/** AppliedWrite is one write the guard's Redis applied (from MONITOR): its token and who wrote it. */
export interface AppliedWrite {
  readonly token: bigint;
  readonly writer: string;
}

/** parseAppliedValue reads a data value `<token>:<writer>` (store-worker.ts); undefined: not one. */
export function parseAppliedValue(value: string): AppliedWrite | undefined {
  const m = /^(\d+):(.+)$/.exec(value);
  return m?.[1] !== undefined && m[2] !== undefined ? { token: BigInt(m[1]), writer: m[2] } : undefined;
}

/** WorkerEvent is one line a worker printed (store-worker.ts), with which worker printed it. */
export interface WorkerEvent {
  readonly worker: number;
  readonly kind: 'granted' | 'lost' | 'released' | 'write';
  readonly token: bigint;
  /** at: Date.now() of grants and ends; undefined for writes. */
  readonly at?: number;
  /** askedAt: for grants, Date.now() when the worker began to ask for it (its acquire() call). */
  readonly askedAt?: number;
  /** applied: for writes, whether the store applied it. */
  readonly applied?: boolean;
}

/** StoreTrialVerdict: the S3 violations and the overlap windows of a trial. */
export interface StoreTrialVerdict {
  readonly s3: readonly string[];
  readonly sharedTokens: number;
  readonly interleavedSharedTokens: number;
  readonly grantRegressions: number;
  readonly overlaps: readonly { readonly workers: readonly [number, number]; readonly ms: number }[];
  readonly appliedWrites: number;
}

/** parseWorkerLine reads one stdout line of a store worker (undefined: not an event). */
export function parseWorkerLine(worker: number, line: string): WorkerEvent | undefined {
  const [kind, token, third, fourth] = line.trim().split(' ');
  if (token === undefined || !/^\d+$/.test(token)) return undefined;
  if (kind === 'write') return { worker, kind, token: BigInt(token), applied: third === 'true' };
  if (kind === 'granted' && fourth !== undefined)
    return { worker, kind, token: BigInt(token), at: Number(third), askedAt: Number(fourth) };
  if (kind === 'granted' || kind === 'lost' || kind === 'released')
    return { worker, kind, token: BigInt(token), at: Number(third) };
  return undefined;
}

/**
 * checkStoreTrial: `applied` is the data key's writes in the store's order (a bare token: writer
 * unknown); `events` every worker line (in arrival order); `endAt` the trial's end.
 */
export function checkStoreTrial(
  applied: readonly (AppliedWrite | bigint)[],
  events: readonly WorkerEvent[],
  endAt: number,
): StoreTrialVerdict {
  const s3: string[] = [];
  let max: AppliedWrite | undefined;
  let sharedTokens = 0;
  let interleavedSharedTokens = 0;
  // The writers of the highest token so far, and the last of them.
  let writers = new Set<string>();
  let lastWriter = '';
  for (const [i, a] of applied.entries()) {
    const w = typeof a === 'bigint' ? { token: a, writer: '' } : a;
    if (max !== undefined && w.token < max.token)
      s3.push(`write #${i} with token ${w.token} applied after token ${max.token}`);
    else if (max !== undefined && w.token === max.token) {
      if (w.writer !== lastWriter && writers.has(w.writer)) interleavedSharedTokens++;
      if (w.writer !== max.writer) sharedTokens++;
      writers.add(w.writer);
      lastWriter = w.writer;
    }
    if (max === undefined || w.token > max.token) {
      max = w;
      writers = new Set([w.writer]);
      lastWriter = w.writer;
    }
  }
  // A grant G reported before H began to ask (G.at < H.askedAt) was counted before H's request
  // left, so H's token must be larger. Lines of two processes reach us in either order (a worker
  // starved of CPU prints late), so arrival order alone would show regressions that are not;
  // without askedAt (older lines) arrival order is all there is.
  let grantRegressions = 0;
  const grants = events.filter((e) => e.kind === 'granted');
  for (const [i, h] of grants.entries()) {
    const asked = h.askedAt;
    const before =
      asked !== undefined ? grants.filter((g) => g !== h && g.at !== undefined && g.at < asked) : grants.slice(0, i);
    // A token granted twice is a regression in one of the two orders, whenever each was asked.
    const repeated = grants.slice(0, i).some((g) => g.token === h.token);
    if (repeated || before.some((g) => g.token >= h.token)) grantRegressions++;
  }
  // Beliefs per worker: from a grant to its loss or release (or the end).
  const beliefs: { worker: number; from: number; to: number }[] = [];
  const open = new Map<number, { worker: number; from: number; to: number }>();
  for (const e of events) {
    if (e.kind === 'granted' && e.at !== undefined) {
      const b = { worker: e.worker, from: e.at, to: endAt };
      open.set(e.worker, b);
      beliefs.push(b);
    } else if ((e.kind === 'lost' || e.kind === 'released') && e.at !== undefined) {
      const b = open.get(e.worker);
      if (b !== undefined) b.to = e.at;
      open.delete(e.worker);
    }
  }
  const overlaps: { workers: [number, number]; ms: number }[] = [];
  for (let i = 0; i < beliefs.length; i++)
    for (let j = i + 1; j < beliefs.length; j++) {
      const a = beliefs[i];
      const b = beliefs[j];
      if (a === undefined || b === undefined || a.worker === b.worker) continue;
      const ms = Math.min(a.to, b.to) - Math.max(a.from, b.from);
      if (ms > 0) overlaps.push({ workers: [a.worker, b.worker], ms });
    }
  return { s3, sharedTokens, interleavedSharedTokens, grantRegressions, overlaps, appliedWrites: applied.length };
}
