/**
 * The lines a demo worker prints on stdout, one JSON object each, and their parser. Tokens are
 * decimal strings (they can exceed 2^53).
 */

/** StateEvent: the agent's answer changed (held, waiting, lost, … or `unreachable`). */
export interface StateEvent {
  readonly type: 'state';
  readonly pod: string;
  readonly state: string;
  readonly held: boolean;
  readonly token?: string;
  /** holder: the pod the agent's Lease names as holder, if any. */
  readonly holder?: string;
}

/** CheckedEvent: the agent said "held with this token"; the write follows after the think time. */
export interface CheckedEvent {
  readonly type: 'checked';
  readonly pod: string;
  readonly seq: number;
  readonly token: string;
}

/**
 * WriteEvent: the outcome of the write of round `seq`. Fenced writes that were refused carry the
 * high-water mark that refused them; plain writes carry the value they overwrote.
 */
export interface WriteEvent {
  readonly type: 'write';
  readonly pod: string;
  readonly seq: number;
  readonly token: string;
  readonly fenced: boolean;
  readonly accepted: boolean;
  readonly value: string;
  readonly highWater?: string;
  readonly previous?: string | null;
}

/** ErrorEvent: a write failed (Redis unreachable, say). */
export interface ErrorEvent {
  readonly type: 'error';
  readonly pod: string;
  readonly seq: number;
  readonly message: string;
}

export type WorkerEvent = StateEvent | CheckedEvent | WriteEvent | ErrorEvent;

/** parseWorkerEvent reads one stdout line; undefined for anything that is not a worker event. */
export function parseWorkerEvent(line: string): WorkerEvent | undefined {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null || !('type' in v) || !('pod' in v) || typeof v.pod !== 'string')
    return undefined;
  switch (v.type) {
    case 'state':
    case 'checked':
    case 'write':
    case 'error':
      return v as WorkerEvent;
    default:
      return undefined;
  }
}
