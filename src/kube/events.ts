/**
 * Kubernetes Events for transitions users care about (granted, released, expired, fencing
 * unavailable). Best effort: an Event that cannot be written is logged, never retried, and never
 * fails a reconcile — Events complement conditions, they do not replace them.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../observability/logger.ts';

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

/** eventRecorder writes core/v1 Events as `component`, on behalf of instance `host`. */
export function eventRecorder(kc: KubeConfig, component: string, host: string, log: Logger): EventRecorder {
  const core = kc.makeApiClient(CoreV1Api);
  return {
    emit(target, type, reason, message) {
      const now = new Date();
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
      }).catch((err: unknown) => { log.error({ err, reason }, 'Failed to create Event'); });
    },
  };
}
