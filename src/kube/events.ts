/**
 * eventRecorder: the Event recorder (event-recorder.ts) writing through the one API client's Event
 * requests (transport/resources.ts), for the controller. The agent calls recordEvents with the
 * same requests and never loads this.
 */
import { connect, type KubeconfigSource } from '../transport/connect.ts';
import { eventRequests } from '../transport/resources.ts';
import type { Logger } from '../observability/logger.ts';
import {
  recordEvents,
  type EventRecorder,
  type EventRetry,
  type EventWriter,
  type RecorderOptions,
} from './event-recorder.ts';

export type { EventRecorder, EventRetry, EventTarget, RecorderOptions } from './event-recorder.ts';

/** eventWriterFrom is the {@link EventWriter} of the API client (or kubeconfig) `source`. */
export function eventWriterFrom(source: KubeconfigSource): EventWriter {
  return eventRequests(connect(source));
}

/**
 * eventRecorder writes core/v1 Events as `component`, on behalf of instance `host`, through the
 * one API client (see event-recorder.ts recordEvents for the contract).
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
