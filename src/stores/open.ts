/**
 * openStore: a store URL (stores/url.ts) to an open LockStore. The one entry the library loads,
 * lazily, when acquire() is given a `store` (client/store-acquire.ts): ioredis is loaded only then.
 */
import type { TimerClock } from '../runtime/clock.ts';
import { openRedisStore } from './redis/backend.ts';
import { openShardedStore } from './redis/sharded.ts';
import { openRedlockStore } from './redlock/masters.ts';
import type { LockStore } from './store.ts';
import { parseStoreUrl } from './url.ts';

export type { LockStore } from './store.ts';
export { holdLock, type HoldResult, type StoreHold } from './hold.ts';
export { checkTtl, DEFAULT_TTL_MS } from './redis/timing.ts';

/**
 * openStore parses `url` (errors name `what`) and connects. It resolves once the connections are
 * ready (Redlock: a majority of them), or after `readyWithinMs` at most (default: 2 s for Redis,
 * 1 s for Redlock), whichever is first: a store down then is retried by the attempts.
 */
export async function openStore(
  url: string,
  what: string,
  clock: TimerClock,
  readyWithinMs?: number,
): Promise<LockStore> {
  const spec = parseStoreUrl(url, what);
  switch (spec.kind) {
    case 'redis':
      return openRedisStore(spec.target, spec.display, readyWithinMs);
    case 'shards':
      return openShardedStore(spec.shards, spec.previous, spec.display, clock, readyWithinMs);
    case 'redlock':
      return openRedlockStore(spec.masters, spec.display, clock, readyWithinMs);
  }
}
