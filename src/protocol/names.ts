/**
 * The names and keys on the wire: what the controller writes and the agent (or the library) reads,
 * and the other way round. Pure and free of imports, so that any side can name them without
 * loading the other side's code.
 *
 * - A lock's Lease is `dlock-<lock>` in the lock's namespace ({@link leaseName}), labelled
 *   `fencepost.io/lock: <lock>` ({@link LOCK_LABEL}); its annotations carry the token high-water
 *   mark, the term's renew deadline and period, and how the last holder left (see lease/record.ts
 *   for the Lease bodies built from them).
 * - A Semaphore lock (spec.mode Semaphore) keeps `dlock-<lock>` as its anchor, which never names a
 *   holder and carries the lock-wide token high-water mark, and holds each permit `i` on its own
 *   Lease `dlock.<lock>.<i>` ({@link permitLeaseName}), labelled with {@link LOCK_LABEL} and
 *   {@link PERMIT_LABEL}.
 * - A pod carries per-lock keys under `<lock>.lock.fencepost.io/` ({@link podKeys}): the holder
 *   label and grant annotations the controller maintains, and the Mutex request and run-id
 *   annotations the pod's agent writes. Completed runs are recorded on the Lease
 *   ({@link COMPLETED_RUNS_ANNOTATION}), not on pods.
 */

/**
 * isDnsLabel: `name` is a DNS label (RFC 1123: lower-case letters, digits and `-`, starting and
 * ending with a letter or digit, at most 63 characters) — what a lock name and a namespace must be,
 * whichever store holds the lock (the CRD checks it for DistributedLocks; the Redis stores check
 * it themselves, so that their keys hold no separator a name could forge).
 */
export function isDnsLabel(name: string): boolean {
  return /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name);
}

/** LEASE_PREFIX starts the name of every lock's Lease (admission policies match it). */
export const LEASE_PREFIX = 'dlock-';

/** leaseName is the deterministic name of a lock's Lease (lock names are DNS labels, at most 63 characters). */
export function leaseName(lockName: string): string {
  return `${LEASE_PREFIX}${lockName}`;
}

/**
 * permitLeaseName is the name of permit `permit` (0-based) of a Semaphore lock: `dlock.<lock>.<permit>`.
 *
 * Not `dlock-<lock>-<permit>`: that is also the Lease of a lock named `<lock>-<permit>` in the same
 * namespace, and every suffix of Lease-name characters is some valid lock name, so no `dlock-` name
 * is free of collisions. `dlock.` differs from every {@link leaseName} at its sixth character, and
 * the part after the last dot is the permit (digits, no dot), so distinct (lock, permit) pairs get
 * distinct names even for lock names with dots. Lock names are at most 63 characters, so the name
 * stays far below the 253 a Lease name may have.
 */
export function permitLeaseName(lockName: string, permit: number): string {
  return `dlock.${lockName}.${permit}`;
}

/** PERMIT_LEASE_PREFIX starts the name of every permit Lease (admission policies match it, as they match `dlock-`). */
export const PERMIT_LEASE_PREFIX = 'dlock.';

/**
 * permitOfLease is the permit number of `name` if it is a permit Lease of `lockName`
 * ({@link permitLeaseName}), or undefined for any other name (the anchor included). Only canonical
 * decimal spellings count (no sign, no leading zeros), so one permit has one name.
 */
export function permitOfLease(lockName: string, name: string): number | undefined {
  const prefix = `${PERMIT_LEASE_PREFIX}${lockName}.`;
  if (!name.startsWith(prefix)) return undefined;
  const rest = name.slice(prefix.length);
  if (!/^(0|[1-9][0-9]{0,5})$/.test(rest)) return undefined;
  return Number(rest);
}

/**
 * LOCK_FINALIZER is on every DistributedLock the controller has seen: its cleanup (release the
 * Lease, take the holder marks off the pods) runs before the lock goes. Users who remove the
 * controller first remove it by hand (docs/operations.md, uninstall).
 */
export const LOCK_FINALIZER = 'fencepost.io/lease-cleanup';

/** LOCK_LABEL names the DistributedLock a Lease belongs to. */
export const LOCK_LABEL = 'fencepost.io/lock';

/** PERMIT_LABEL is on a Semaphore's permit Leases: the permit number (decimal string). */
export const PERMIT_LABEL = 'fencepost.io/permit';

/** lockLabelSelector selects the Lease(s) labelled with one lock (a label selector string). */
export function lockLabelSelector(lockName: string): string {
  return `${LOCK_LABEL}=${lockName}`;
}

/** TOKEN_ANNOTATION holds the token of the Lease's current or last grant (decimal string). */
export const TOKEN_ANNOTATION = 'fencepost.io/fencing-token';
/**
 * RELEASE_ANNOTATION records how the last holder left: `Released` (voluntary), `Expired` or
 * `Terminated` (revoked by the controller), or `Lost` (the term ended with nothing to show that
 * its holder stopped: the Lease was deleted, or the lock is being deleted).
 */
export const RELEASE_ANNOTATION = 'fencepost.io/release';
/** RENEW_DEADLINE_ANNOTATION is the holder's renew deadline for this term, in milliseconds. */
export const RENEW_DEADLINE_ANNOTATION = 'fencepost.io/renew-deadline-ms';
/** RENEW_PERIOD_ANNOTATION is the holder's renew period for this term, in milliseconds. */
export const RENEW_PERIOD_ANNOTATION = 'fencepost.io/renew-period-ms';
/** LAST_HOLDER_ANNOTATION names the holder that released or lost the Lease, so the next grant prefers someone else. */
export const LAST_HOLDER_ANNOTATION = 'fencepost.io/last-holder';

/**
 * GRANTED_REQUEST_ANNOTATION (Mutex) is the request a term answered: the holder pod's request
 * annotation value when it was granted. A holder that released and whose pod still shows that same
 * value has not asked again — the controller's pod cache has not yet seen the withdrawal, which the
 * holder wrote before its release — so it is not granted a new term on it.
 */
export const GRANTED_REQUEST_ANNOTATION = 'fencepost.io/granted-request';

/**
 * COMPLETED_RUNS_ANNOTATION holds the run ids completed on this Lease (Mutex run-once): a JSON
 * list of `{ runId, token, holder, completedAt }`, newest last, at most 32 (lease/record.ts). A
 * holder appends its run in a compare-and-swap while the Lease still names it with the run's
 * token, so every later grant — a compare-and-swap after it — carries the entry.
 */
export const COMPLETED_RUNS_ANNOTATION = 'fencepost.io/completed-runs';

/**
 * PRIORITY_ANNOTATION, on a candidate pod: its priority for Election grants, a decimal int32
 * (`-2147483648` to `2147483647`, no sign `+`, no leading zeros), default 0. Higher goes first;
 * ties keep the existing order (oldest pod first, then name). A value that is not such an integer
 * counts as 0 (and the controller records a Warning Event naming the pod and the value). It
 * orders candidates only: it never ends a holder's term by itself (preemption, if the lock opts
 * in, is a planned handover).
 */
export const PRIORITY_ANNOTATION = 'fencepost.io/priority';

/**
 * ReleaseKind: the values of {@link RELEASE_ANNOTATION} — on its own, on its own at the end of a
 * planned handover (`HandedOver`: the Lease's handover mark names the successor; see
 * protocol/handover.ts), revoked after expiry or termination, revoked because a user forced a
 * release (`Revoked`: the holder may still run; lock-delay applies), or lost.
 */
export type ReleaseKind = 'Released' | 'HandedOver' | 'Expired' | 'Terminated' | 'Revoked' | 'Lost';

/** LOCK_KEY_SUFFIX ends every per-lock pod key prefix. */
export const LOCK_KEY_SUFFIX = '.lock.fencepost.io';

/**
 * lockKeyPrefix is the label/annotation key prefix for one lock on a pod: `<lock>.lock.fencepost.io`.
 * Per-lock keys let one pod hold several locks; a lock name is a DNS label (at most 63 characters,
 * enforced by the CRD), so the prefix is always a valid DNS subdomain.
 */
export function lockKeyPrefix(lockName: string): string {
  return `${lockName}${LOCK_KEY_SUFFIX}`;
}

/** PodKeys are the per-lock label and annotation keys on a pod. */
export interface PodKeys {
  /** holder: label `"true"` on the holder alone, for Services that select only the holder. */
  readonly holder: string;
  /** token: annotation, the holder's fencing token (decimal string). */
  readonly token: string;
  /** lease: annotation, the name of the lock's Lease (where the agent renews). */
  readonly lease: string;
  /** acquireTime: annotation, when this grant was made (RFC 3339). */
  readonly acquireTime: string;
  /** expireTime: annotation, when this grant expires unless renewed (RFC 3339, as of the grant). */
  readonly expireTime: string;
  /** request: annotation set by the pod's agent, Mutex mode: it wants the lock since this time (RFC 3339, ms). */
  readonly request: string;
  /** runId: annotation set with request: the run the pod wants to do (run-once-per-window). */
  readonly runId: string;
}

/** podKeys returns the keys for a lock. */
export function podKeys(lockName: string): PodKeys {
  const p = lockKeyPrefix(lockName);
  return {
    holder: `${p}/holder`,
    token: `${p}/fencing-token`,
    lease: `${p}/lease`,
    acquireTime: `${p}/acquire-time`,
    expireTime: `${p}/expire-time`,
    request: `${p}/request`,
    runId: `${p}/run-id`,
  };
}

/** HOLDER_LABEL_SUFFIX ends every lock's holder label key ({@link PodKeys.holder}). */
const HOLDER_LABEL_SUFFIX = `${LOCK_KEY_SUFFIX}/holder`;

/** lockOfHolderLabel is the lock whose holder label `key` is, or undefined for any other key. */
export function lockOfHolderLabel(key: string): string | undefined {
  return key.endsWith(HOLDER_LABEL_SUFFIX) ? key.slice(0, -HOLDER_LABEL_SUFFIX.length) : undefined;
}

/** FENCE_KEY_PREFIX starts every counter key; a guard's marks in a shared Redis must not use it. */
export const FENCE_KEY_PREFIX = 'fencepost:fence:';

/**
 * fenceCounterKey is a lock's counter key, `fencepost:fence:<namespace>/<key>`, where key is the
 * lock's name unless its spec names another. The namespace prefix is not optional: the key is
 * chosen by whoever may create locks in that namespace, and a key outside its own prefix would
 * let them pump (or, with INCR's 2^63−1 limit, wedge) another namespace's counter, or any other
 * key in a shared Redis. Redis keys are flat strings, so nothing in the suffix can climb out of
 * the prefix. The Redis lock store (src/stores/redis/keys.ts) uses the same key, so a lock's
 * tokens continue when it moves between the controller's grants and a store.
 */
export function fenceCounterKey(namespace: string, key: string): string {
  return `${FENCE_KEY_PREFIX}${namespace}/${key}`;
}
