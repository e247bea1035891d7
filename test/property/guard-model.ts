/**
 * The reference model of a fenced store, in BigInt (a guard compared with it must refuse every
 * forged or malformed token): what every guard must do with one write, given its mark and the write
 * ids it has applied. The property tests run the real guard and this model side by side and compare
 * after every write.
 */
import fc from 'fast-check';
import { malformedToken, validToken, type Malformed } from './tokens.ts';

/** GuardOp is one write a test sends: to lock 0 or 1, with a valid or malformed token, maybe a write id. */
export interface GuardOp {
  readonly lock: 0 | 1;
  readonly token: { readonly ok: true; readonly value: bigint } | { readonly ok: false; readonly bad: Malformed };
  readonly writeId: string | undefined;
  /** retry: send the previous write to this lock again, unchanged (an idempotent retry). */
  readonly retry: boolean;
}

/** Expected is what the model says a write must do. */
export type Expected = 'malformed' | 'applied' | 'duplicate' | 'stale';

/** LockModel is one protected key's state: its mark and the write ids it applied. */
export interface LockModel {
  mark: bigint | undefined;
  value: string | undefined;
  readonly applied: Set<string>;
}

export function emptyLock(): LockModel {
  return { mark: undefined, value: undefined, applied: new Set() };
}

/**
 * expect applies one write to the model: a malformed token changes nothing; a write id already
 * applied is a duplicate (whatever its token, as the guards document); a token below the mark is
 * stale; anything else (token >= mark) is applied and becomes the mark.
 */
export function applyToModel(
  m: LockModel,
  token: bigint | undefined,
  value: string,
  writeId: string | undefined,
  withIds: boolean,
): Expected {
  if (token === undefined) return 'malformed';
  if (withIds && writeId !== undefined && m.applied.has(writeId)) return 'duplicate';
  if (m.mark !== undefined && token < m.mark) return 'stale';
  m.mark = token;
  m.value = value;
  if (withIds && writeId !== undefined) m.applied.add(writeId);
  return 'applied';
}

/**
 * Small token pools make collisions likely: equal tokens, stale ones, and a token of one lock
 * used at the other (which a per-key guard cannot tell from its own: it has no lock identity).
 */
const sequenceToken: fc.Arbitrary<GuardOp['token']> = fc.oneof(
  { arbitrary: fc.bigInt({ min: 0n, max: 12n }).map((value) => ({ ok: true as const, value })), weight: 6 },
  { arbitrary: validToken.map((value) => ({ ok: true as const, value })), weight: 3 },
  { arbitrary: malformedToken.map((bad) => ({ ok: false as const, bad })), weight: 1 },
);

/** guardOp: one write of a sequence. */
export const guardOp: fc.Arbitrary<GuardOp> = fc.record({
  lock: fc.constantFrom<0 | 1>(0, 1),
  token: sequenceToken,
  writeId: fc.option(fc.constantFrom('w1', 'w2', 'w3', 'w4'), { nil: undefined, freq: 2 }),
  // One write in six repeats the previous write to its lock unchanged.
  retry: fc.integer({ min: 0, max: 5 }).map((r) => r === 0),
});

/** guardOps: an interleaving of valid, stale, malformed and retried writes on two locks. */
export const guardOps: fc.Arbitrary<GuardOp[]> = fc.array(guardOp, { minLength: 1, maxLength: 14 });
