/**
 * Kubernetes Events for transitions users care about (granted, released, expired, fencing
 * unavailable, an agent's step-down). Best effort: an Event that cannot be written is logged and
 * never fails a reconcile — Events complement conditions, they do not replace them. The
 * controller's are never retried (the next reconcile has news of its own); the agent's step-down
 * Event is retried with backoff, because the usual reason an agent steps down is that it cannot
 * reach the API server, and that Event is the cluster's only record of the step-down.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../observability/logger.ts';
import type { TimerClock } from '../runtime/clock.ts';
import { httpStatus } from '../runtime/errors.ts';
import { itemExponential } from '../runtime/ratelimiter.ts';

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

/** eventRecorder writes core/v1 Events as `component`, on behalf of instance `host`. */
export function eventRecorder(kc: KubeConfig, component: string, host: string, log: Logger, retry?: EventRetry): EventRecorder {
  const core = kc.makeApiClient(CoreV1Api);
  return {
    emit(target, type, reason, message) {
      // The Event's time is when it happened, not when a retry got it through.
      const now = new Date();
      // One backoff per Event: its delays double from the first failure on.
      const backoff = retry !== undefined ? { ...retry, delays: itemExponential<'event'>(retry.firstDelayMs, retry.maxDelayMs) } : undefined;
      const write = (attempt: number): void => {
        core.createNamespacedEvent({
          namespace: target.namespace,
          body: {
            metadata: { generateName: `${target.name}.`, namespace: target.namespace },
            involvedObject: { apiVersion: target.apiVersion, kind: target.kind, namespace: target.namespace, name: target.name, uid: target.uid },
            type, reason, message,
            source: { component, host },
            reportingComponent: component, reportingInstance: host,
            firstTimestamp: now, lastTimestamp: now, count: 1,
          },
        }).catch((err: unknown) => {
          // A refusal (403 without RBAC for Events, 422) will not change on retry; an outage will.
          if (backoff === undefined || attempt >= backoff.attempts || !worthRetrying(err)) { log.error({ err, reason, attempts: attempt }, 'Failed to create Event'); return; }
          const delayMs = backoff.delays.when('event');
          log.info({ err, reason, attempt, retryInMs: delayMs }, 'Failed to create Event; retrying');
          backoff.clock.setTimeout(() => { write(attempt + 1); }, delayMs).unref();
        });
      };
      write(1);
    },
  };
}

/** worthRetrying: no answer at all (connection refused, timeout), 429, or a server error. */
function worthRetrying(err: unknown): boolean {
  const status = httpStatus(err);
  return status === undefined || status === 429 || status >= 500;
}
