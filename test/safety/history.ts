/**
 * The history of one safety trial: what the authoritative Lease said (every version seen on a
 * watch, in resourceVersion order), what each candidate process believed and attempted (its own
 * event stream), and what the fenced store actually applied (the store's own command log, in
 * execution order), plus the store's content read at the end.
 *
 * Times (`at`) are milliseconds on ONE reference monotonic clock: the trial runner's
 * `performance.now()` when the event reached it. Processes under test never stamp the times the
 * checker compares, so a process under `faketime` or paused by SIGSTOP cannot skew them.
 *
 * Tokens are bigint; holder identities are `<pod>/<uid>` (the Lease's holderIdentity spelling).
 */

/** LeaseVersion is one version of the lock's Lease as a watch (or GET) delivered it. */
export interface LeaseVersion {
  readonly at: number;
  /** name: the Lease's name (a Semaphore's history holds its anchor and every permit Lease). */
  readonly name?: string;
  readonly resourceVersion: bigint;
  /** holder: `<pod>/<uid>`, undefined when nobody holds the Lease. */
  readonly holder: string | undefined;
  /** token: the fencing-token annotation (current or last grant's). */
  readonly token: bigint | undefined;
  readonly renewTime: string | undefined;
  readonly transitions: number;
  /** release: the release annotation (`Released`, `Expired`, `Terminated`) when nobody holds it. */
  readonly release: string | undefined;
  /** handoverMark: the controller's planned-handover mark (`fencepost.io/handover-to`, raw JSON), if any. */
  readonly handoverMark?: string;
}

/**
 * ClientEvent is what one candidate process reported (or what the runner did to it: `killed`,
 * `paused`, `resumed`), attributed to the pod incarnation `holder` (`<pod>/<uid>`).
 * - granted/renewed/lost/released: the session's own view of its term (the agent's belief).
 * - attempt: a write is about to be sent with `token`; `afterValidUntil` when the local validity
 *   deadline computed at the check had already passed at send time.
 * - outcome: the store's answer as the client saw it (`accepted`, or rejected as stale, or an error).
 */
export type ClientEvent =
  | {
      readonly kind: 'granted' | 'renewed' | 'lost' | 'released';
      readonly at: number;
      readonly holder: string;
      readonly token: bigint;
      readonly reason?: string;
    }
  | {
      readonly kind: 'attempt';
      readonly at: number;
      readonly holder: string;
      readonly token: bigint;
      readonly writeId: string;
      readonly afterValidUntil: boolean;
    }
  | {
      readonly kind: 'outcome';
      readonly at: number;
      readonly holder: string;
      readonly token: bigint;
      readonly writeId: string;
      readonly result: 'accepted' | 'stale' | 'error';
      readonly detail?: string;
    }
  | { readonly kind: 'killed' | 'paused' | 'resumed' | 'left'; readonly at: number; readonly holder: string };

/** StoreApply is one write the fenced store executed, in the store's execution order. */
export interface StoreApply {
  readonly at: number;
  readonly writeId: string;
  readonly token: bigint;
  /** writer: the holder identity written into the value by the client. */
  readonly writer: string;
  /** key, op: for the multi-key workload's shared keys, which key and whether it was SET or DELeted. */
  readonly key?: string;
  readonly op?: 'set' | 'del';
}

/** TrialHistory is everything the checker needs about one trial (one lock). */
export interface TrialHistory {
  readonly lock: string;
  readonly leases: readonly LeaseVersion[];
  readonly clients: readonly ClientEvent[];
  readonly store: readonly StoreApply[];
  /** finalStore: writeId → value, read from the store after the trial ended. */
  readonly finalStore: ReadonlyMap<string, string>;
  /** leaseDurationMs: the lock's L (for reporting only; no invariant depends on timing). */
  readonly leaseDurationMs: number;
}

/** storeValue is how a client encodes a write, so that the store log alone names writer and token. */
export function storeValue(writeId: string, token: bigint, writer: string): string {
  return `${writeId}|${token.toString()}|${writer}`;
}

/** parseStoreValue reverses storeValue; undefined for anything else. */
export function parseStoreValue(value: string): { writeId: string; token: bigint; writer: string } | undefined {
  const m = /^([^|]+)\|(0|[1-9][0-9]{0,18})\|(.+)$/.exec(value);
  if (m === null) return undefined;
  return { writeId: m[1] ?? '', token: BigInt(m[2] ?? '0'), writer: m[3] ?? '' };
}
