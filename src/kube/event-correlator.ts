/**
 * The pure core of the Event recorder: which Events to write, which to PATCH, which to drop. The
 * semantics of client-go's `tools/record` EventCorrelator (events_cache.go), so that fencepost's
 * Events look and behave like every controller-runtime operator's:
 *
 * 1. **Spam filter** (EventSourceObjectSpamFilter): a token bucket per source + object. An Event
 *    that finds the bucket empty is dropped — not queued, not counted.
 * 2. **Aggregation** (EventAggregator): Events that differ only in their message (same source,
 *    object, type and reason) are written as they are until `maxSimilar` distinct messages were
 *    seen within `similarWindowMs` of each other; from then on they become ONE Event whose message
 *    is "(combined from similar events): <latest message>", counted like an identical Event.
 * 3. **Counting** (eventLogger): an Event identical to one already written (same source, object,
 *    type, reason and message) is not created again: the existing Event is PATCHed with count + 1
 *    and a new lastTimestamp (and keeps its firstTimestamp).
 *
 * No I/O: callers bring the clock readings and report what the API server answered
 * ({@link EventCorrelator.recorded}). State lives in bounded LRU maps (`cacheSize` keys each), as
 * in client-go: a key pushed out is simply treated as new.
 *
 * Differences from client-go, on purpose:
 * - The spam filter runs first, so a dropped Event leaves no trace: `count` is the number of
 *   occurrences that were recorded, and the aggregation window is not kept open by a flood that
 *   is being dropped. (client-go counts before filtering, so its next accepted PATCH jumps.)
 * - The count is committed only when the write succeeded, so a failed write is not counted
 *   (client-go commits before writing).
 * - Durations (the bucket's refill, the aggregation window) are measured on the monotonic clock;
 *   the wall clock only stamps the Events.
 */
import type { EventTarget } from './events.ts';

/**
 * CorrelatorOptions: the knobs, all client-go's defaults (NewEventCorrelator), because they are
 * what users of kubectl and of every other operator already live with:
 */
export interface CorrelatorOptions {
  /**
   * burst: Events a source may write about one object back to back; default 25 (client-go
   * defaultSpamBurst). fencepost writes at most a handful per transition, so 25 is a whole
   * incident's worth before throttling starts.
   */
  readonly burst: number;
  /**
   * refillMs: one more Event per object every refillMs; default 300,000 (5 minutes, client-go
   * defaultSpamQPS = 1/300). It bounds the long tail of an object that flaps forever: at most 12
   * Events an hour, ~288 a day, and the count on an aggregated Event tells the rest.
   */
  readonly refillMs: number;
  /**
   * maxSimilar: distinct messages for one source + object + type + reason before they are
   * combined into one Event; default 10 (client-go defaultAggregateMaxEvents). fencepost's
   * messages carry tokens and pod names, so repeated grants differ in message and are combined
   * by this rule rather than counted as identical.
   */
  readonly maxSimilar: number;
  /**
   * similarWindowMs: similar Events further apart than this start a fresh group; default 600,000
   * (10 minutes, client-go defaultAggregateIntervalInSeconds).
   */
  readonly similarWindowMs: number;
  /** cacheSize: keys remembered per map (LRU); default 4096 (client-go maxLruCacheEntries). */
  readonly cacheSize: number;
}

/** DEFAULT_CORRELATOR_OPTIONS: client-go's defaults; see {@link CorrelatorOptions}. */
const DEFAULT_CORRELATOR_OPTIONS: CorrelatorOptions = Object.freeze({
  burst: 25,
  refillMs: 300_000,
  maxSimilar: 10,
  similarWindowMs: 600_000,
  cacheSize: 4096,
});

/** COMBINED_PREFIX starts the message of an Event that stands for similar Events (client-go's words). */
export const COMBINED_PREFIX = '(combined from similar events): ';

/** EventFacts: what identifies an Event for correlation. */
export interface EventFacts {
  /** component and host: the Event's source (reportingComponent / reportingInstance). */
  readonly component: string;
  readonly host: string;
  readonly target: EventTarget;
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  readonly message: string;
}

/**
 * Write is what to send for one admitted Event: a new Event (`create`), or a PATCH of the
 * existing Event `name` (`patch`). `key` names the correlation entry to pass to `recorded`.
 * `count` and `firstTimestamp` are the values the written Event must carry; `message` may be the
 * combined message.
 */
export type Write =
  | {
      readonly kind: 'create';
      readonly key: string;
      readonly message: string;
      readonly count: number;
      readonly firstTimestamp: Date;
    }
  | {
      readonly kind: 'patch';
      readonly key: string;
      readonly name: string;
      readonly message: string;
      readonly count: number;
      readonly firstTimestamp: Date;
    };

/** A small LRU map: `get` refreshes an entry, `set` evicts the least recently used beyond `max`. */
class Lru<V> {
  readonly #map = new Map<string, V>();
  readonly #max: number;
  constructor(max: number) {
    this.#max = max;
  }
  get(key: string): V | undefined {
    const v = this.#map.get(key);
    if (v !== undefined) {
      this.#map.delete(key);
      this.#map.set(key, v);
    }
    return v;
  }
  set(key: string, v: V): void {
    this.#map.delete(key);
    this.#map.set(key, v);
    if (this.#map.size > this.#max) {
      const oldest = this.#map.keys().next();
      if (oldest.done !== true) this.#map.delete(oldest.value);
    }
  }
}

interface Bucket {
  tokens: number;
  atMs: number;
}
interface Group {
  readonly messages: Set<string>;
  lastMs: number;
}
interface Written {
  readonly name: string;
  readonly count: number;
  readonly firstTimestamp: Date;
}

const join = (parts: readonly string[]): string => JSON.stringify(parts);
const objectParts = (f: EventFacts): string[] => [
  f.component,
  f.host,
  f.target.apiVersion,
  f.target.kind,
  f.target.namespace,
  f.target.name,
  f.target.uid,
];

/**
 * EventCorrelator decides, Event by Event, whether to drop, create or PATCH; see the module
 * comment for the rules. Not thread-safe in any sense that matters to JavaScript, but its callers
 * must call `correlate` and the matching `recorded` in order for one Event before correlating the
 * next (the recorder writes one Event at a time), or a PATCH could miss the Event just created.
 */
export class EventCorrelator {
  readonly #o: CorrelatorOptions;
  readonly #buckets: Lru<Bucket>;
  readonly #groups: Lru<Group>;
  readonly #written: Lru<Written>;

  /** @throws RangeError for a burst or maxSimilar below 1, or a refill, window or cache size that is not positive. */
  constructor(options: Partial<CorrelatorOptions> = {}) {
    const o = { ...DEFAULT_CORRELATOR_OPTIONS, ...options };
    if (!(
      Number.isInteger(o.burst) &&
      o.burst >= 1 &&
      Number.isInteger(o.maxSimilar) &&
      o.maxSimilar >= 1 &&
      o.refillMs > 0 &&
      o.similarWindowMs > 0 &&
      Number.isInteger(o.cacheSize) &&
      o.cacheSize >= 1
    )) {
      throw new RangeError(`EventCorrelator: invalid options ${JSON.stringify(o)}`);
    }
    this.#o = o;
    this.#buckets = new Lru(o.cacheSize);
    this.#groups = new Lru(o.cacheSize);
    this.#written = new Lru(o.cacheSize);
  }

  /**
   * admit takes a token from the bucket of the Event's source + object at monotonic time `nowMs`
   * and says whether the Event may be written. A new bucket starts full; it refills one token per
   * `refillMs`, up to `burst`. Call it once per Event, when the Event happens.
   */
  admit(f: EventFacts, nowMs: number): boolean {
    const key = join(objectParts(f));
    const b = this.#buckets.get(key) ?? { tokens: this.#o.burst, atMs: nowMs };
    b.tokens = Math.min(this.#o.burst, b.tokens + Math.max(0, nowMs - b.atMs) / this.#o.refillMs);
    b.atMs = nowMs;
    const ok = b.tokens >= 1;
    if (ok) b.tokens -= 1;
    this.#buckets.set(key, b);
    return ok;
  }

  /**
   * correlate returns what to write for an admitted Event that happened at monotonic `nowMs` and
   * wall time `now`: a create with count 1, or, when the same Event (or the combined Event of its
   * group) was written before, a PATCH of that Event with its count + 1.
   */
  correlate(f: EventFacts, nowMs: number, now: Date): Write {
    // Aggregation: group by everything but the message (client-go EventAggregatorByReasonFunc).
    const groupKey = join([...objectParts(f), f.type, f.reason]);
    let group = this.#groups.get(groupKey);
    if (group === undefined || nowMs - group.lastMs > this.#o.similarWindowMs)
      group = { messages: new Set(), lastMs: nowMs };
    group.messages.add(f.message);
    group.lastMs = nowMs;
    this.#groups.set(groupKey, group);
    let key = join([...objectParts(f), f.type, f.reason, f.message]);
    let message = f.message;
    if (group.messages.size >= this.#o.maxSimilar) {
      // Keep the set from growing past the threshold (client-go pops one; which one is irrelevant).
      const first = group.messages.values().next();
      if (first.done !== true) group.messages.delete(first.value);
      key = groupKey;
      message = COMBINED_PREFIX + f.message;
    }
    // Counting: the same key written before → PATCH it.
    const prior = this.#written.get(key);
    if (prior === undefined) return { kind: 'create', key, message, count: 1, firstTimestamp: now };
    return {
      kind: 'patch',
      key,
      name: prior.name,
      message,
      count: prior.count + 1,
      firstTimestamp: prior.firstTimestamp,
    };
  }

  /**
   * recorded tells the correlator that the API server holds Event `name` for `write.key` with
   * `write.count`: the next identical Event will PATCH it. Call it only after a successful write.
   */
  recorded(write: Write, name: string): void {
    this.#written.set(write.key, { name, count: write.count, firstTimestamp: write.firstTimestamp });
  }
}
