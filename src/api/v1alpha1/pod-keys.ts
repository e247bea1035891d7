/**
 * The per-lock label and annotation keys on pods: a contract between the controller (which puts
 * the holder label and the grant annotations on the holder pod) and the agent and library (which
 * read them and write the Mutex request annotations). Pure and free of imports, so that the agent
 * can name the keys without loading any controller code.
 */

/**
 * lockKeyPrefix is the label/annotation key prefix for one lock on a pod: `<lock>.lock.fencepost.io`.
 * Per-lock keys let one pod hold several locks; a lock name is a DNS label (at most 63 characters,
 * enforced by the CRD), so the prefix is always a valid DNS subdomain.
 */
export function lockKeyPrefix(lockName: string): string {
  return `${lockName}.lock.fencepost.io`;
}

/** PodKeys are the label and annotation keys the controller maintains on a lock's holder pod. */
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
  /** completedRun / completedAt: annotations set by a holder that finished a run id. */
  readonly completedRun: string;
  readonly completedAt: string;
}

/** podKeys returns the keys for a lock. */
export function podKeys(lockName: string): PodKeys {
  const p = lockKeyPrefix(lockName);
  return {
    holder: `${p}/holder`, token: `${p}/fencing-token`, lease: `${p}/lease`, acquireTime: `${p}/acquire-time`, expireTime: `${p}/expire-time`,
    request: `${p}/request`, runId: `${p}/run-id`, completedRun: `${p}/completed-run`, completedAt: `${p}/completed-at`,
  };
}
