/**
 * Server-Sent Events for the agent's `GET /v1/locks/NAME/events` (WHATWG HTML, "Server-sent
 * events"): every event carries an `id:` line, the stream opens with a `retry:` line, and a client
 * that reconnects with `Last-Event-ID` first gets the events it missed (while this agent process
 * still remembers them), then the current `state`.
 *
 * Ids are `<stream>-<seq>`: `stream` names this agent process (its start time), `seq` counts the
 * lock's events from 1. An id of another process (the agent restarted) or one older than the
 * journal's memory replays nothing: the `state` event that follows is always the whole truth, the
 * replay only tells what happened in between.
 */
import type { HandoverNotice, LockEvent, LockSnapshot } from './session.ts';

/** SSE_RETRY_MS is the reconnection delay the stream asks clients for (the `retry:` line). */
export const SSE_RETRY_MS = 1000;

/** JOURNAL_SIZE is how many events per lock a journal remembers for Last-Event-ID replay. */
const JOURNAL_SIZE = 64;

/**
 * StoppingEvent tells the application that the agent got SIGTERM in the plain-sidecar form: it
 * keeps the term (renewing) until the application releases the lock — once it has stopped
 * writing — or until its --app-stop-timeout, when it stops without releasing.
 */
export interface StoppingEvent {
  readonly type: 'stopping';
  readonly lock: string;
  readonly token: string;
  readonly reason: string;
}

/** SseFrame is one event of the stream. */
export interface SseFrame {
  readonly id: string;
  readonly event: string;
  readonly data: unknown;
}

/** formatSse renders frames as the wire text (an `id:`, `event:` and one `data:` line each, then a blank line). */
export function formatSse(frames: readonly SseFrame[]): string {
  return frames.map((f) => `id: ${f.id}\nevent: ${f.event}\ndata: ${JSON.stringify(f.data)}\n\n`).join('');
}

/** EventJournal numbers one lock's events and remembers the last JOURNAL_SIZE of them. */
export class EventJournal {
  readonly #stream: string;
  readonly #size: number;
  readonly #frames: SseFrame[] = [];
  #seq = 0;

  /** stream names this process (ids of other streams replay nothing); size bounds the memory. */
  constructor(stream: string, size = JOURNAL_SIZE) {
    this.#stream = stream;
    this.#size = size;
  }

  /** record numbers an event and returns its frame. */
  record(e: LockEvent | HandoverNotice | StoppingEvent): SseFrame {
    this.#seq++;
    const frame: SseFrame = { id: this.#id(this.#seq), event: e.type, data: e };
    this.#frames.push(frame);
    if (this.#frames.length > this.#size) this.#frames.shift();
    return frame;
  }

  /**
   * opening is what a new stream sends first: the events after lastEventId (when it is an id of
   * this stream that the journal still covers), then `state` with the snapshot, whose id is the
   * last event's (so a reconnect after it replays only newer events).
   */
  opening(snapshot: LockSnapshot, lastEventId: string | undefined): SseFrame[] {
    const state: SseFrame = { id: this.#id(this.#seq), event: 'state', data: snapshot };
    const seen = this.#seqOf(lastEventId);
    if (seen === undefined) return [state];
    const oldest = this.#seq - this.#frames.length; // the journal holds seq oldest+1 .. #seq
    if (seen < oldest || seen > this.#seq) return [state];
    return [...this.#frames.slice(seen - oldest), state];
  }

  /** lastId is the id of the last recorded event (`<stream>-0` before the first). */
  lastId(): string {
    return this.#id(this.#seq);
  }

  #id(seq: number): string {
    return `${this.#stream}-${seq}`;
  }

  #seqOf(id: string | undefined): number | undefined {
    if (id === undefined || !id.startsWith(`${this.#stream}-`)) return undefined;
    const rest = id.slice(this.#stream.length + 1);
    return /^\d{1,15}$/.test(rest) ? Number(rest) : undefined;
  }
}
