/**
 * Kubernetes Events for transitions users care about (granted, released, expired, terminated,
 * fencing unavailable, an agent's step-down), recorded the way client-go's recorder records them
 * (see event-correlator.ts): an Event identical to one already written PATCHes that Event's
 * `count` and `lastTimestamp` instead of creating another; similar Events (same reason, other
 * messages) are combined after ten in ten minutes; and each object gets a token bucket (burst 25,
 * one more every 5 minutes), beyond which Events are dropped.
 *
 * Best effort: an Event that cannot be written is logged and never fails a reconcile — Events
 * complement conditions, they do not replace them. The controller's are never retried (the next
 * reconcile has news of its own); the agent's step-down Event is retried with backoff, because the
 * usual reason an agent steps down is that it cannot reach the API server, and that Event is the
 * cluster's only record of the step-down.
 *
 * Writes go out one at a time, in the order the Events happened (as client-go's broadcaster sends
 * them): a PATCH must know the name of the Event that the create before it made.
 *
 * The writes go through an {@link EventWriter} port, so that this module loads no Kubernetes
 * client: the controller and the agent both pass the transport's (transport/resources.ts
 * eventRequests; the controller's through events.ts eventRecorder).
 */
import type { Logger } from '../observability/logger.ts';
import { realClock, type Clock, type TimerClock } from '../runtime/clock.ts';
import { httpStatus } from '../runtime/errors.ts';
import { itemExponential } from '../runtime/ratelimiter.ts';
import { EventCorrelator, type CorrelatorOptions, type EventFacts, type Write } from './event-correlator.ts';

/** EventTarget is the object an Event is about. */
export interface EventTarget {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
}

/** EventRecorder writes Events. */
export interface EventRecorder {
  emit(target: EventTarget, type: 'Normal' | 'Warning', reason: string, message: string): void;
}

/**
 * EventRetry makes a recorder try a failed write again: up to `attempts` writes in all, waiting
 * `firstDelayMs` after the first failure, doubling up to `maxDelayMs`.
 */
export interface EventRetry {
  readonly attempts: number;
  readonly firstDelayMs: number;
  readonly maxDelayMs: number;
  readonly clock: TimerClock;
}

/** RecorderOptions: test seams and limits of {@link eventRecorder}; every field has a production default. */
export interface RecorderOptions {
  /** clock times the spam filter and the aggregation window, and stamps Events; default realClock. */
  readonly clock?: Clock;
  /** correlation overrides client-go's defaults (burst 25, refill 5 min, 10 similar in 10 min, LRU 4096). */
  readonly correlation?: Partial<CorrelatorOptions>;
  /**
   * maxQueued: Events waiting for their turn to be written, beyond which new ones are dropped
   * (logged); default 1000, client-go's broadcaster queue length. Only an API server that stopped
   * answering lets the queue grow: the spam filter bounds each object's share.
   */
  readonly maxQueued?: number;
}

/** EventBody is the core/v1 Event the recorder creates (timestamps as Dates, sent as RFC 3339). */
export interface EventBody {
  readonly metadata: { readonly generateName: string; readonly namespace: string };
  readonly involvedObject: {
    readonly apiVersion: string;
    readonly kind: string;
    readonly namespace: string;
    readonly name: string;
    readonly uid: string;
  };
  readonly type: string;
  readonly reason: string;
  readonly message: string;
  readonly source: { readonly component: string; readonly host: string };
  readonly reportingComponent: string;
  readonly reportingInstance: string;
  readonly firstTimestamp: Date;
  readonly lastTimestamp: Date;
  readonly count: number;
}

/** WrittenEvent is what the recorder reads back from a write: the Event's name. */
export interface WrittenEvent {
  readonly metadata?: { readonly name?: string };
}

/**
 * EventWriter is the port the recorder writes through. Both reject with an error that
 * runtime/errors.ts httpStatus reads (404 and 403 on patch fall back to a create).
 */
export interface EventWriter {
  create(namespace: string, event: EventBody): Promise<WrittenEvent>;
  /** patch sends a JSON merge patch of the Event `name`. */
  patch(
    namespace: string,
    name: string,
    patch: { count: number; lastTimestamp: Date; message: string },
  ): Promise<WrittenEvent>;
}

/**
 * recordEvents writes core/v1 Events through `writer` as `component`, on behalf of instance
 * `host`, with client-go's correlation (module comment). `retry`: see {@link EventRetry}; without
 * it, a failed write is logged and dropped.
 */
export function recordEvents(
  writer: EventWriter,
  component: string,
  host: string,
  log: Logger,
  retry?: EventRetry,
  options: RecorderOptions = {},
): EventRecorder {
  const clock = options.clock ?? realClock;
  const correlator = new EventCorrelator(options.correlation);
  const maxQueued = options.maxQueued ?? 1000;
  let queued = 0;
  let chain: Promise<void> = Promise.resolve();

  /** send makes one attempt at a write: a PATCH of the existing Event, or a create (also when the Event to PATCH is gone). */
  const send = async (f: EventFacts, w: Write, now: Date): Promise<WrittenEvent> => {
    if (w.kind === 'patch') {
      try {
        return await writer.patch(f.target.namespace, w.name, {
          count: w.count,
          lastTimestamp: now,
          message: w.message,
        });
      } catch (err) {
        // Events live for the API server's --event-ttl (1 h by default): a counted Event may be
        // gone (404). And RBAC written before Events were counted grants create but not patch
        // (403): the occurrence is still recorded, as a new Event, rather than lost.
        const status = httpStatus(err);
        if (status !== 404 && status !== 403) throw err;
      }
    }
    const t = f.target;
    return await writer.create(t.namespace, {
      metadata: { generateName: `${t.name}.`, namespace: t.namespace },
      involvedObject: { apiVersion: t.apiVersion, kind: t.kind, namespace: t.namespace, name: t.name, uid: t.uid },
      type: f.type,
      reason: f.reason,
      message: w.message,
      source: { component, host },
      reportingComponent: component,
      reportingInstance: host,
      firstTimestamp: w.firstTimestamp,
      lastTimestamp: now,
      count: w.count,
    });
  };

  /** deliver writes one Event, retrying as `retry` says; it never rejects. */
  const deliver = async (f: EventFacts, nowMs: number, now: Date): Promise<void> => {
    const w = correlator.correlate(f, nowMs, now);
    // One backoff per Event: its delays double from the first failure on.
    const delays = retry !== undefined ? itemExponential<'event'>(retry.firstDelayMs, retry.maxDelayMs) : undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        const written = await send(f, w, now);
        correlator.recorded(w, written.metadata?.name ?? '');
        return;
      } catch (err) {
        // A refusal (403 without RBAC for Events, 422) will not change on retry; an outage will.
        if (retry === undefined || delays === undefined || attempt >= retry.attempts || !worthRetrying(err)) {
          log.error({ err, reason: f.reason, attempts: attempt }, 'Failed to create Event');
          return;
        }
        const delayMs = delays.when('event');
        log.info({ err, reason: f.reason, attempt, retryInMs: delayMs }, 'Failed to create Event; retrying');
        await new Promise<void>((resolve) => {
          retry.clock.setTimeout(resolve, delayMs).unref();
        });
      }
    }
  };

  return {
    emit(target, type, reason, message) {
      // The Event's time is when it happened, not when its turn or a retry got it through.
      const now = clock.now();
      const nowMs = clock.monotonicMs();
      const f: EventFacts = { component, host, target, type, reason, message };
      if (!correlator.admit(f, nowMs)) {
        log.debug({ reason, kind: target.kind, name: target.name }, 'Dropped Event (rate limit per object)');
        return;
      }
      if (queued >= maxQueued) {
        log.error({ reason, kind: target.kind, name: target.name, queued }, 'Dropped Event (queue full)');
        return;
      }
      queued++;
      chain = chain
        .then(() => deliver(f, nowMs, now))
        .finally(() => {
          queued--;
        });
    },
  };
}

/** worthRetrying: no answer at all (connection refused, timeout), 429, or a server error. */
function worthRetrying(err: unknown): boolean {
  const status = httpStatus(err);
  return status === undefined || status === 429 || status >= 500;
}
