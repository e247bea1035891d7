/**
 * The failover count of a Sentinel-managed master: Sentinel's config-epoch for it, which every
 * failover raises. The acquire script mixes it into the lock's epoch (fence-next.lua fence_epoch),
 * because the master's replication ID alone misses one failback: Sentinel promotes a replica,
 * which grants, and fails back to the old master before it told that master to follow (it waits
 * seconds for that, and not at all while the promoted replica is down). The old master is still
 * a master with the replication ID it had, and its counter is below the replica's tokens; only
 * the config-epoch says a failover happened in between.
 *
 * Every grant asks every Sentinel (in parallel, one round trip) and takes the largest answer: a
 * Sentinel that has not heard of the last failover yet answers an older epoch, and the old value
 * would let the failback above through. When none answers within the bound, the last value seen
 * is used (a grant went through the master the Sentinels named, so the client saw one), and with
 * none seen the grant fails: a token issued without it could be the one that goes back.
 */
import { Redis } from 'ioredis';
import { withTimeout } from '../../runtime/timeout.ts';
import type { Endpoint } from '../url.ts';

/** SENTINEL_ASK_MS bounds one SENTINEL MASTER question: a Sentinel slower than this is left out of the maximum. */
export const SENTINEL_ASK_MS = 500;

/** SentinelFailovers: the config-epoch of one master, asked of its Sentinels. */
export interface SentinelFailovers {
  /** current is the largest config-epoch the Sentinels give now (decimal), as fence_epoch takes it. */
  current(): Promise<string>;
  close(): void;
}

/** configEpoch reads "config-epoch" from a SENTINEL MASTER answer (a flat field, value list). */
export function configEpoch(reply: unknown): bigint | undefined {
  if (!Array.isArray(reply)) return undefined;
  for (let i = 0; i + 1 < reply.length; i += 2) {
    if (reply[i] === 'config-epoch') {
      const v: unknown = reply[i + 1];
      return typeof v === 'string' && /^\d{1,19}$/.test(v) ? BigInt(v) : undefined;
    }
  }
  return undefined;
}

/** sentinelFailovers asks `sentinels` about the master `name`. */
export function sentinelFailovers(sentinels: readonly Endpoint[], name: string): SentinelFailovers {
  const clients = sentinels.map((e) => {
    const c = new Redis({
      host: e.host,
      port: e.port,
      // Queued while it connects: the first grant asks before the connection is up.
      enableOfflineQueue: true,
      maxRetriesPerRequest: 0,
      connectTimeout: SENTINEL_ASK_MS,
      retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 5), 1000),
    });
    c.on('error', () => undefined);
    return c;
  });
  let last: bigint | undefined;
  return {
    async current() {
      const answers = await Promise.allSettled(
        clients.map((c) => withTimeout(c.call('SENTINEL', 'MASTER', name), SENTINEL_ASK_MS, 'SENTINEL MASTER')),
      );
      let best: bigint | undefined;
      for (const a of answers) {
        const v = a.status === 'fulfilled' ? configEpoch(a.value) : undefined;
        if (v !== undefined && (best === undefined || v > best)) best = v;
      }
      if (best !== undefined && (last === undefined || best > last)) last = best;
      if (last === undefined)
        throw new Error(
          `no Sentinel (${sentinels.map((e) => `${e.host}:${e.port}`).join(', ')}) gave the config-epoch of master ${name}`,
        );
      return last.toString();
    },
    close() {
      for (const c of clients) c.disconnect();
    },
  };
}
