/**
 * Fencing backends as the controller uses them: which dispenser a lock uses, its counter key, and
 * whether it can issue tokens right now (for the Degraded condition, without a round trip).
 */
import { Redis } from 'ioredis';
import type { DistributedLock } from '../api/v1alpha1/distributedlock.ts';
import { fenceCounterKey, leaseFence, redisFence, type FenceDispenser } from './redis-fence.ts';
import { parseShardUrls, shardFor, shardIdentity } from './shards.ts';

/** LockFencing is how one lock gets its tokens. */
export interface LockFencing {
  readonly backend: 'Redis' | 'Lease';
  readonly key: string;
  readonly dispenser: FenceDispenser;
  readonly ready: boolean;
  readonly detail?: string;
  /** notConfigured: the lock asks for Redis but the controller has no --redis-url (see FencingState). */
  readonly notConfigured?: boolean;
}

/** FencingBackends picks each lock's backend; `close` ends the Redis connection. */
export interface FencingBackends {
  forLock(lock: DistributedLock): LockFencing;
  close(): Promise<void>;
}

/** redisKeyFor is a lock's counter key (fenceCounterKey: `fencepost:fence:<namespace>/<spec.fencing.key or name>`). */
function redisKeyFor(lock: DistributedLock): string {
  return fenceCounterKey(lock.metadata.namespace ?? '', lock.spec.fencing?.key ?? lock.metadata.name ?? '');
}

const unavailable: FenceDispenser = {
  next: () =>
    Promise.reject(new Error('spec.fencing.backend is Redis but the controller was started without --redis-url')),
};

/**
 * fencingBackends: with Redis URLs (one, or several shards separated by commas: fencing/shards.ts),
 * locks default to Redis; without one, to the embedded Lease backend, and a lock that asks for
 * Redis is reported not ready. Each lock's counter lives on the shard its key is placed on. The
 * ioredis clients fail commands at once while disconnected (no offline queue), so a grant never
 * waits on a dead Redis; they reconnect in the background.
 */
export function fencingBackends(redisUrl: string | undefined, onStatus?: (ready: boolean) => void): FencingBackends {
  const urls = redisUrl !== undefined && redisUrl !== '' ? parseShardUrls(redisUrl, '--redis-url') : [];
  const shards = urls.map((url) => {
    const client = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 2000,
      commandTimeout: 2000,
      retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 6), 5000),
    });
    const shard = { id: shardIdentity(url), client, dispenser: redisFence(client), lastError: 'connecting' };
    client.on('error', (err: Error) => {
      shard.lastError = err.message;
    });
    client.on('ready', () => onStatus?.(true));
    client.on('close', () => onStatus?.(false));
    return shard;
  });
  const ids = shards.map((s) => s.id);
  return {
    forLock(lock) {
      const wanted = lock.spec.fencing?.backend ?? (shards.length > 0 ? 'Redis' : 'Lease');
      if (wanted === 'Lease') return { backend: 'Lease', key: '', dispenser: leaseFence, ready: true };
      const key = redisKeyFor(lock);
      const shard = shards[shardFor(ids, key)];
      if (shard === undefined) {
        return {
          backend: 'Redis',
          key,
          dispenser: unavailable,
          ready: false,
          detail: 'the controller has no --redis-url',
          notConfigured: true,
        };
      }
      const ready = shard.client.status === 'ready';
      const where = shards.length > 1 ? ` (shard ${shard.id})` : '';
      return {
        backend: 'Redis',
        key,
        dispenser: shard.dispenser,
        ready,
        ...(ready ? {} : { detail: `Redis${where} ${shard.client.status}: ${shard.lastError}` }),
      };
    },
    async close() {
      for (const s of shards) s.client.disconnect();
      await Promise.resolve();
    },
  };
}
