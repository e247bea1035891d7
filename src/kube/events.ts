/**
 * eventRecorder: the Event recorder (event-recorder.ts) writing through client-node's CoreV1Api
 * over the one API client (typed-api.ts), for the controller. The agent uses recordEvents with its
 * own transport requests and never loads this.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { connect, type KubeconfigSource } from '../transport/connect.ts';
import type { Logger } from '../observability/logger.ts';
import {
  recordEvents,
  type EventRecorder,
  type EventRetry,
  type EventWriter,
  type RecorderOptions,
} from './event-recorder.ts';
import { mergePatch } from './patch.ts';
import { typedApi } from './typed-api.ts';

export type { EventRecorder, EventRetry, EventTarget, RecorderOptions } from './event-recorder.ts';

/** eventWriterFrom adapts client-node's CoreV1Api to an {@link EventWriter}. */
export function eventWriterFrom(source: KubeconfigSource): EventWriter {
  const core = typedApi(connect(source), CoreV1Api);
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
  source: KubeconfigSource,
  component: string,
  host: string,
  log: Logger,
  retry?: EventRetry,
  options: RecorderOptions = {},
): EventRecorder {
  return recordEvents(eventWriterFrom(source), component, host, log, retry, options);
}
