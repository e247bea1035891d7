/**
 * What a LockSession (session.ts) is made with and what it reports: its options, its snapshot,
 * the handover notices and lock events it delivers and logs, the Lease watch it uses.
 */
import type { V1Lease } from '@kubernetes/client-node';
import type { Logger } from '../observability/logger.ts';
import type { LockEvent } from '../protocol/lock-event.ts';
import type { HolderRef } from '../protocol/holder.ts';
import { lockLabelSelector } from '../protocol/names.ts';
import type { TimerClock } from '../runtime/clock.ts';
import type { SupervisedInformer } from '../runtime/informer.ts';
import type { LeaseClient } from '../runtime/leaderelection.ts';
import type { ApiClient } from '../transport/client.ts';
import { ListWatchInformer } from '../transport/informer.ts';
import { leasesPath } from '../transport/resources.ts';
import { heldTerm, type LockState, type MinDrain, type SessionAction, type SessionState } from './session-state.ts';

/** LockSnapshot is what the agent's HTTP API returns for a lock. Tokens are decimal strings. */
export interface LockSnapshot {
  readonly lock: string;
  readonly held: boolean;
  readonly token: string | undefined;
  /** holder: the Lease's holder pod name, whoever it is. */
  readonly holder: string | undefined;
  /** expiresInMs: for a held lock, the time left before this agent stops trusting it. */
  readonly expiresInMs: number | undefined;
  readonly state: LockState;
  /**
   * permit: for a Semaphore, the permit this pod holds (its permit Lease is dlock.<lock>.<permit>);
   * absent otherwise. A guard fences a Semaphore per permit: key `<lock>/<permit>`.
   */
  readonly permit?: number;
  /**
   * draining: a planned handover of the held term is under way: the successor pod, and how long
   * until the agent stops believing and releases (the app may answer earlier: POST …/drained).
   * Absent otherwise.
   */
  readonly draining?: { readonly to: string; readonly deadlineInMs: number };
}

/**
 * HandoverNotice tells the app about a planned handover of its held term (kept apart from
 * LockEvent, whose four types its consumers switch on): `draining` when it starts — stop taking
 * new work, finish what is in flight, then answer (POST …/drained) or let the drain period run
 * out; the lock is still held until the `released` LockEvent — and `handoverCancelled` when it
 * was withdrawn or lapsed and the term goes on.
 */
export interface HandoverNotice {
  readonly type: 'draining' | 'handoverCancelled';
  readonly lock: string;
  readonly token: string;
  /** to: the successor pod (draining only). */
  readonly to?: string;
  /** drainMs: the drain period (draining only). */
  readonly drainMs?: number;
}

/** LockSessionOptions configures a session. */
export interface LockSessionOptions {
  /** api is the API server client (transport/connect.ts connect). */
  readonly api: ApiClient;
  readonly namespace: string;
  readonly lock: string;
  /** self is this pod incarnation (downward API POD_NAME and POD_UID). */
  readonly self: HolderRef;
  /**
   * clock: the session measures its terms on conservativeClock (runtime/clock.ts) of it (the larger of
   * monotonic and wall-clock progress), so a VM pause that the monotonic clock does not count
   * still ends a term; the watch and Mutex requests use it as given.
   */
  readonly clock: TimerClock;
  readonly log: Logger;
  /** leases overrides the Lease client (tests); defaults to one made from api. */
  readonly leases?: LeaseClient;
  /** random for renew jitter; defaults to Math.random. */
  readonly random?: () => number;
  /**
   * leaseInformer overrides the watch of the lock's Lease (tests: the model-based race test feeds
   * Lease changes itself); defaults to a list+watch informer made from api.
   */
  readonly leaseInformer?: LeaseInformer;
  /**
   * minDrainMs: the shortest drain period of a planned handover this session's app needs, as a
   * function of the held term's timings, so that it can stop its work before the release
   * (session-machine.ts, SessionState.minDrainMs); the app answers with drained() once it has.
   * Default: 0, the period the handover asks for.
   */
  readonly minDrainMs?: MinDrain;
}

/** LeaseInformer is the part of a Lease informer a session uses. */
export type LeaseInformer = Pick<SupervisedInformer<V1Lease>, 'start' | 'get' | 'onChange' | 'stop'>;

/** leaseInformerOf watches the Leases labelled with the lock (the session picks its own by name). */
export function leaseInformerOf(o: LockSessionOptions): LeaseInformer {
  return new ListWatchInformer<V1Lease>({
    name: `lease:${o.lock}`,
    api: o.api,
    clock: o.clock,
    log: o.log,
    labelSelector: lockLabelSelector(o.lock),
    path: leasesPath(o.namespace),
  });
}

/**
 * announce logs an Emit action and says what it delivers: a LockEvent to the session's listeners,
 * or (draining, handoverCancelled) a HandoverNotice.
 */
export function announce(
  a: Extract<SessionAction, { type: 'Emit' }>,
  log: Logger,
  lock: string,
): { readonly event?: LockEvent; readonly notice?: HandoverNotice } {
  const token = a.token.toString();
  if (a.event === 'granted') log.info({ lock, token }, 'Acquired lock');
  if (a.event === 'lost') log.info({ lock, token, reason: a.reason }, 'Lost lock');
  if (a.event === 'released') log.info({ lock, token, reason: a.reason }, 'Released lock');
  if (a.event === 'draining' || a.event === 'handoverCancelled') {
    if (a.event === 'draining') log.info({ lock, token, handover: a.handover }, 'Draining for a planned handover');
    else log.info({ lock, token }, 'Planned handover cancelled');
    return {
      notice: {
        type: a.event,
        lock,
        token,
        ...(a.handover !== undefined ? { to: a.handover.to, drainMs: a.handover.drainMs } : {}),
      },
    };
  }
  return {
    event: {
      type: a.event,
      lock,
      token,
      ...(a.reason !== undefined ? { reason: a.reason } : {}),
      ...(a.expiresInMs !== undefined ? { expiresInMs: a.expiresInMs } : {}),
    },
  };
}

/** logReport logs a failure the session's machine handles (a Report action). */
export function logReport(a: Extract<SessionAction, { type: 'Report' }>, log: Logger, lock: string): void {
  if (a.what === 'RenewFailed') log.info({ lock, err: a.err }, 'Failed to renew Lease; retrying');
  else if (a.what === 'TokenWentBack')
    log.error({ err: a.err, lock }, 'Refused a token below one seen on the Lease before (the Lease was tampered with)');
  else if (a.what === 'TimingsContradict')
    log.error({ err: a.err, lock }, 'Refused a term whose timings contradict each other; handing it back');
  else log.error({ err: a.err, lock }, 'Failed to parse Lease');
}

/** snapshotOf is the snapshot of a session in `s` (its deadline already checked) at monotonic `nowMs`. */
export function snapshotOf(s: SessionState, lock: string, permit: number | undefined, nowMs: number): LockSnapshot {
  const term = heldTerm(s);
  return {
    lock,
    held: term !== undefined,
    token: term?.token.toString(),
    holder: s.lease?.record?.holder?.name,
    expiresInMs: term !== undefined ? Math.max(0, Math.floor(term.validUntilMs - nowMs)) : undefined,
    state: s.phase.name,
    ...(term !== undefined && permit !== undefined ? { permit } : {}),
    ...(term !== undefined && s.draining !== undefined
      ? { draining: { to: s.draining.to, deadlineInMs: Math.max(0, Math.floor(s.draining.untilMs - nowMs)) } }
      : {}),
  };
}
