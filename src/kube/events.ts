/**
 * eventRecorder: the Event recorder (event-recorder.ts) writing through client-node's CoreV1Api,
 * for the controller. The agent uses recordEvents with its own transport and never loads this.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../observability/logger.ts';
import {
  recordEvents,
  type EventRecorder,
  type EventRetry,
  type EventWriter,
  type RecorderOptions,
} from './event-recorder.ts';
import { mergePatch } from './patch.ts';

export type { EventRecorder, EventRetry, EventTarget, RecorderOptions } from './event-recorder.ts';

/** eventWriterFrom adapts client-node's CoreV1Api to an {@link EventWriter}. */
export function eventWriterFrom(kc: KubeConfig): EventWriter {
  const core = kc.makeApiClient(CoreV1Api);
  return {
    create: (namespace, body) => core.createNamespacedEvent({ namespace, body }),
    patch: (namespace, name, body) => core.patchNamespacedEvent({ namespace, name, body }, mergePatch),
  };
}

/**
 * eventRecorder writes core/v1 Events as `component`, on behalf of instance `host`, through
 * client-node (see event-recorder.ts recordEvents for the contract).
 */
export function eventRecorder(
  kc: KubeConfig,
  component: string,
  host: string,
  log: Logger,
  retry?: EventRetry,
  options: RecorderOptions = {},
): EventRecorder {
  return recordEvents(eventWriterFrom(kc), component, host, log, retry, options);
}
