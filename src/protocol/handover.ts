/**
 * Planned handover on the wire: the request a user (or `kubectl fencepost handover`) writes on the
 * DistributedLock, the controller's answer beside it, and the mark the controller puts on the
 * lock's Lease for the holder's agent. Pure; imports only the protocol's own modules.
 *
 * The flow (docs/controller.md#planned-handover):
 * 1. A user annotates the lock with {@link HANDOVER_REQUEST_ANNOTATION}: the target pod and the
 *    token of the grant the request was made against (a stale request never moves a later grant).
 * 2. The controller checks it and marks the Lease ({@link HANDOVER_MARK_ANNOTATION}: the target's
 *    holder identity, the token, the drain period). Only the controller writes the mark.
 * 3. The holder's agent sees the mark on its Lease watch while it holds that token, tells the app
 *    (draining), waits for the drain period or the app's early answer, stops believing, then
 *    releases the Lease (kind `Released`, which the agent admission policy allows; `HandedOver` is
 *    reserved for when it allows that too). The mark stays on the released Lease.
 * 4. The controller sees the release and grants the target (if it is still a candidate) with a
 *    larger token, without lock-delay, and answers the request ({@link HANDOVER_RESULT_ANNOTATION}).
 */
import { holderIdentity, parseHolderIdentity, type HolderRef } from './holder.ts';
import { tokenOrUndefined } from './token.ts';

/**
 * HANDOVER_REQUEST_ANNOTATION, on a DistributedLock: a JSON object
 * `{"to":"<pod name>","token":"<current token>","drainSeconds":<n>?,"requestedAt":"<RFC 3339>"?,"by":"<who>"?}`.
 * Written by users (their RBAC on the lock's metadata), removed by the controller when it answers.
 */
export const HANDOVER_REQUEST_ANNOTATION = 'fencepost.io/handover';

/**
 * HANDOVER_RESULT_ANNOTATION, on a DistributedLock: the controller's answer to the last request, a
 * JSON object `{"to","token","outcome":"Completed"|"Refused"|"TimedOut","message","at"}` and, when
 * completed, `"newToken"`.
 */
export const HANDOVER_RESULT_ANNOTATION = 'fencepost.io/handover-result';

/**
 * HANDOVER_MARK_ANNOTATION, on a lock's Lease (controller-owned): a JSON object
 * `{"to":"<pod name>/<pod uid>","token":"<holder's token>","drainMs":<n>}`. The holder's agent drains
 * and releases only while it holds exactly that token; the next grant (and only one after a
 * voluntary release of that token) goes to `to` if it is still a candidate.
 */
export const HANDOVER_MARK_ANNOTATION = 'fencepost.io/handover-to';

/** MAX_DRAIN_SECONDS bounds spec.handover.drainSeconds and a request's drainSeconds (the CRD's maximum). */
export const MAX_DRAIN_SECONDS = 3600;

/** DEFAULT_DRAIN_SECONDS is the schema default of spec.handover.drainSeconds. */
export const DEFAULT_DRAIN_SECONDS = 30;

/** HandoverRequest is a parsed {@link HANDOVER_REQUEST_ANNOTATION}. */
export interface HandoverRequest {
  /** to: the target pod's name. */
  readonly to: string;
  /** token: the token of the grant the request was made against. */
  readonly token: bigint;
  /** drainSeconds: the per-request drain period, when given (0…MAX_DRAIN_SECONDS). */
  readonly drainSeconds: number | undefined;
  readonly requestedAt: string | undefined;
  /** by: who asked (informational, as the plugin writes it; the audit log is the real record). */
  readonly by: string | undefined;
  /** raw: the annotation's exact text (the controller removes it only while it is still this). */
  readonly raw: string;
}

/**
 * parseHandoverRequest reads the lock's request annotation: a HandoverRequest, or a sentence
 * saying why it is not one (the controller refuses it with that sentence), or undefined when
 * there is no request.
 */
export function parseHandoverRequest(raw: string | undefined): HandoverRequest | string | undefined {
  if (raw === undefined) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    return `${HANDOVER_REQUEST_ANNOTATION} is not JSON`;
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    return `${HANDOVER_REQUEST_ANNOTATION} is not a JSON object`;
  const { to, token, drainSeconds, requestedAt, by } = v as Record<string, unknown>;
  if (typeof to !== 'string' || to === '') return `${HANDOVER_REQUEST_ANNOTATION}: "to" must name a pod`;
  const t = typeof token === 'string' ? tokenOrUndefined(token) : undefined;
  if (t === undefined)
    return `${HANDOVER_REQUEST_ANNOTATION}: "token" must be the current fencing token (a decimal string)`;
  if (
    drainSeconds !== undefined &&
    (typeof drainSeconds !== 'number' ||
      !Number.isInteger(drainSeconds) ||
      drainSeconds < 0 ||
      drainSeconds > MAX_DRAIN_SECONDS)
  )
    return `${HANDOVER_REQUEST_ANNOTATION}: "drainSeconds" must be an integer from 0 to ${MAX_DRAIN_SECONDS}`;
  return {
    to,
    token: t,
    drainSeconds: drainSeconds,
    requestedAt: typeof requestedAt === 'string' ? requestedAt : undefined,
    by: typeof by === 'string' ? by : undefined,
    raw,
  };
}

/** formatHandoverRequest is the annotation text of a request (what the plugin writes). */
export function formatHandoverRequest(r: {
  readonly to: string;
  readonly token: bigint;
  readonly drainSeconds?: number | undefined;
  readonly requestedAt: string;
  readonly by?: string | undefined;
}): string {
  return JSON.stringify({
    to: r.to,
    token: r.token.toString(),
    ...(r.drainSeconds !== undefined ? { drainSeconds: r.drainSeconds } : {}),
    requestedAt: r.requestedAt,
    ...(r.by !== undefined ? { by: r.by } : {}),
  });
}

/** HandoverOutcome is how a request ended. */
export type HandoverOutcome = 'Completed' | 'Refused' | 'TimedOut';

/** HandoverResult is a parsed {@link HANDOVER_RESULT_ANNOTATION}. */
export interface HandoverResult {
  readonly to: string;
  readonly token: string;
  readonly outcome: HandoverOutcome;
  readonly message: string;
  readonly at: string;
  readonly newToken?: string;
}

/** formatHandoverResult is the annotation text of an answer. */
export function formatHandoverResult(r: HandoverResult): string {
  return JSON.stringify(r);
}

/** parseHandoverResult reads an answer, or undefined when there is none or it is unreadable. */
export function parseHandoverResult(raw: string | undefined): HandoverResult | undefined {
  if (raw === undefined) return undefined;
  try {
    const v = JSON.parse(raw) as Partial<HandoverResult> | null;
    if (v === null || typeof v !== 'object' || typeof v.outcome !== 'string' || typeof v.token !== 'string')
      return undefined;
    return v as HandoverResult;
  } catch {
    return undefined;
  }
}

/** HandoverMark is a parsed {@link HANDOVER_MARK_ANNOTATION}. */
export interface HandoverMark {
  readonly to: HolderRef;
  readonly token: bigint;
  readonly drainMs: number;
}

/** parseHandoverMark reads the Lease's mark; anything unreadable is no mark (only the controller writes it). */
export function parseHandoverMark(raw: string | undefined): HandoverMark | undefined {
  if (raw === undefined) return undefined;
  try {
    const v = JSON.parse(raw) as Record<string, unknown> | null;
    if (v === null || typeof v !== 'object') return undefined;
    const to = typeof v.to === 'string' ? parseHolderIdentity(v.to) : undefined;
    const token = typeof v.token === 'string' ? tokenOrUndefined(v.token) : undefined;
    const drainMs = v.drainMs;
    if (to === undefined || to.uid === '' || token === undefined) return undefined;
    if (typeof drainMs !== 'number' || !Number.isInteger(drainMs) || drainMs < 0 || drainMs > MAX_DRAIN_SECONDS * 1000)
      return undefined;
    return { to, token, drainMs };
  } catch {
    return undefined;
  }
}

/** formatHandoverMark is the Lease annotation text of a mark. */
export function formatHandoverMark(m: HandoverMark): string {
  return JSON.stringify({ to: holderIdentity(m.to), token: m.token.toString(), drainMs: m.drainMs });
}

/**
 * FORCE_RELEASE_REQUEST_ANNOTATION, on a DistributedLock: `{"token":"<current token>","by":"<who>"?,"requestedAt":"…"?}`
 * (`kubectl fencepost release LOCK --force`). The controller ends that grant (the Lease released
 * as `Revoked`) and grants the next candidate with a larger token. WARNING: the released holder
 * may still be running and believe it holds the lock until its agent sees the Lease; only the
 * fencing guards keep its writes out.
 */
export const FORCE_RELEASE_REQUEST_ANNOTATION = 'fencepost.io/force-release';

/** FORCE_RELEASE_RESULT_ANNOTATION, on a DistributedLock: the controller's answer, as {@link HANDOVER_RESULT_ANNOTATION}. */
export const FORCE_RELEASE_RESULT_ANNOTATION = 'fencepost.io/force-release-result';

/** ForceReleaseRequest is a parsed {@link FORCE_RELEASE_REQUEST_ANNOTATION}. */
export interface ForceReleaseRequest {
  readonly token: bigint;
  readonly by: string | undefined;
  readonly raw: string;
}

/** parseForceReleaseRequest reads the request: a ForceReleaseRequest, a sentence why not, or undefined when none. */
export function parseForceReleaseRequest(raw: string | undefined): ForceReleaseRequest | string | undefined {
  if (raw === undefined) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    return `${FORCE_RELEASE_REQUEST_ANNOTATION} is not JSON`;
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    return `${FORCE_RELEASE_REQUEST_ANNOTATION} is not a JSON object`;
  const { token, by } = v as Record<string, unknown>;
  const t = typeof token === 'string' ? tokenOrUndefined(token) : undefined;
  if (t === undefined)
    return `${FORCE_RELEASE_REQUEST_ANNOTATION}: "token" must be the current fencing token (a decimal string)`;
  return { token: t, by: typeof by === 'string' ? by : undefined, raw };
}

/** formatForceReleaseRequest is the annotation text of a forced release request (what the plugin writes). */
export function formatForceReleaseRequest(r: {
  readonly token: bigint;
  readonly requestedAt: string;
  readonly by?: string | undefined;
}): string {
  return JSON.stringify({
    token: r.token.toString(),
    requestedAt: r.requestedAt,
    ...(r.by !== undefined ? { by: r.by } : {}),
  });
}
