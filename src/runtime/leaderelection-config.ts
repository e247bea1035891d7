/**
 * The leader elector's configuration (leaderelection.ts): its defaults, its callbacks and logger,
 * and the rules a configuration must meet (validateLeaderElectionConfig).
 */
import type { TimerClock } from './clock.ts';
import type { LeaseClient } from './leaderelection.ts';

/** DEFAULT_LEASE_DURATION_MS is the default {@link LeaderElectionConfig.leaseDurationMs} (client-go core clients: 15 s). */
export const DEFAULT_LEASE_DURATION_MS = 15_000;
/** DEFAULT_RENEW_DEADLINE_MS is the default {@link LeaderElectionConfig.renewDeadlineMs} (client-go core clients: 10 s). */
export const DEFAULT_RENEW_DEADLINE_MS = 10_000;
/** DEFAULT_RETRY_PERIOD_MS is the default {@link LeaderElectionConfig.retryPeriodMs} (client-go core clients: 2 s). */
export const DEFAULT_RETRY_PERIOD_MS = 2_000;
/**
 * JITTER_FACTOR is client-go's `JitterFactor`: a candidate waits between `retryPeriodMs` and
 * `(1 + JITTER_FACTOR) × retryPeriodMs` between acquire attempts, and `renewDeadlineMs` must exceed
 * `JITTER_FACTOR × retryPeriodMs`.
 */
export const JITTER_FACTOR = 1.2;

/**
 * LeaderElectionLogger is the logging the elector does: constant messages, structured fields, errors
 * as `{ err }`, like pino. A pino `Logger` satisfies it.
 */
export interface LeaderElectionLogger {
  info(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * LeaderCallbacks are the elector's lifecycle hooks. They run synchronously on the elector's loop,
 * so they must return promptly: start asynchronous work and return. They must not throw; if one
 * does, `run()` stops (stepping down if it was leading, without releasing the Lease) and rejects with
 * that error.
 */
export interface LeaderCallbacks {
  /**
   * onStartedLeading is called once when this replica acquired the Lease. `signal` aborts when it
   * stops leading, for whatever reason; everything started here must stop when it does.
   */
  onStartedLeading(signal: AbortSignal): void;
  /**
   * onStoppedLeading is called exactly once after each `onStartedLeading`, when the term ended: the
   * renew deadline passed, another holder was seen, or `run()` was cancelled (after the release, if
   * any). For a controller that did not ask to stop, the right reaction is to exit the process
   * (controller-runtime: "the binary must exit immediately after losing the lock").
   */
  onStoppedLeading(): void;
  /**
   * onNewLeader is called when the elector observes a holder different from the last one it
   * reported, including the first holder it sees and itself. A Lease with no holder is not reported.
   */
  onNewLeader?(identity: string): void;
}

/** LeaderElectionConfig configures a {@link LeaderElector}; see {@link validateLeaderElectionConfig} for the rules. */
export interface LeaderElectionConfig {
  /** leases reads and writes the Lease; see {@link LeaseClient}. */
  readonly leases: LeaseClient;
  /** namespace of the Lease. */
  readonly namespace: string;
  /** name of the Lease; created on the first attempt if it does not exist. */
  readonly name: string;
  /**
   * identity is this replica's holderIdentity. It must be unique per process incarnation (pod name
   * plus a random suffix or UID): an elector takes over at once a Lease that already names its
   * identity, as client-go does, so two processes sharing one identity would both lead.
   */
  readonly identity: string;
  /**
   * leaseDurationMs is how long a candidate waits, on its own monotonic clock, without observing a
   * change of the Lease record before it takes the Lease over. It also bounds how long a fresh set of
   * replicas waits for a stale holder. Written to the Lease rounded up to whole seconds.
   * Defaults to 15 s.
   */
  readonly leaseDurationMs?: number;
  /**
   * renewDeadlineMs is how long the leader keeps retrying a renewal before it gives up and steps
   * down; an attempt still in flight when it passes is abandoned. Defaults to 10 s.
   *
   * It counts from the moment the last successful renewal (or the acquire) was sent, so a leader
   * believes it leads at most `renewDeadlineMs` after that send (client-go counts it from the
   * start of the round that fails, a `retryPeriodMs` later).
   */
  readonly renewDeadlineMs?: number;
  /**
   * retryPeriodMs is the wait between attempts: between renewals of a healthy leader, between
   * retries of a failing renewal, and (plus up to {@link JITTER_FACTOR} × itself of random jitter)
   * between acquire attempts of a candidate. Defaults to 2 s.
   */
  readonly retryPeriodMs?: number;
  /**
   * clock supplies monotonic time (all expiry and deadline decisions), wall time (only for the
   * acquireTime/renewTime written to the Lease, which no elector reads as a time) and timers.
   */
  readonly clock: TimerClock;
  /**
   * releaseOnCancel releases the Lease when `run()`'s signal aborts while leading, so a successor
   * takes over at its next attempt instead of after a full lease duration. Defaults to true.
   *
   * WARNING: abort `run()` only after everything started in `onStartedLeading` has stopped;
   * otherwise the successor and the still-running work overlap.
   */
  readonly releaseOnCancel?: boolean;
  /** log receives the elector's logs. Defaults to none. */
  readonly log?: LeaderElectionLogger;
  /** random returns a number in [0, 1) for retry jitter. Defaults to `Math.random`; inject it for deterministic tests. */
  readonly random?: () => number;
  /** callbacks are the lifecycle hooks; see {@link LeaderCallbacks}. */
  readonly callbacks: LeaderCallbacks;
}

/**
 * validateLeaderElectionConfig throws a `RangeError` whose message starts with the offending field's
 * name unless, after defaults: every duration is a finite number > 0; `leaseDurationMs >
 * renewDeadlineMs > JITTER_FACTOR × retryPeriodMs` (client-go's rules); and identity, namespace and
 * name are non-empty.
 */
export function validateLeaderElectionConfig(
  config: Pick<
    LeaderElectionConfig,
    'identity' | 'namespace' | 'name' | 'leaseDurationMs' | 'renewDeadlineMs' | 'retryPeriodMs'
  >,
): void {
  const leaseDurationMs = config.leaseDurationMs ?? DEFAULT_LEASE_DURATION_MS;
  const renewDeadlineMs = config.renewDeadlineMs ?? DEFAULT_RENEW_DEADLINE_MS;
  const retryPeriodMs = config.retryPeriodMs ?? DEFAULT_RETRY_PERIOD_MS;
  for (const [field, value] of [
    ['leaseDurationMs', leaseDurationMs],
    ['renewDeadlineMs', renewDeadlineMs],
    ['retryPeriodMs', retryPeriodMs],
  ] as const) {
    if (!Number.isFinite(value) || value <= 0) {
      throw new RangeError(`${field} must be a finite number greater than 0, got ${value}`);
    }
  }
  if (leaseDurationMs <= renewDeadlineMs) {
    throw new RangeError(
      `leaseDurationMs must be greater than renewDeadlineMs, got ${leaseDurationMs} and ${renewDeadlineMs}`,
    );
  }
  if (renewDeadlineMs <= JITTER_FACTOR * retryPeriodMs) {
    throw new RangeError(
      `renewDeadlineMs must be greater than ${JITTER_FACTOR} × retryPeriodMs, got ${renewDeadlineMs} and ${retryPeriodMs}`,
    );
  }
  for (const field of ['identity', 'namespace', 'name'] as const) {
    if (config[field] === '') throw new RangeError(`${field} must not be empty`);
  }
}

/** NOOP_LOGGER is the elector's logger when none is given. */
export const NOOP_LOGGER: LeaderElectionLogger = Object.freeze({
  info: () => undefined,
  debug: () => undefined,
  error: () => undefined,
});
