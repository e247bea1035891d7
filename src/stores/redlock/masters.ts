/**
 * The Redlock store on real masters: one ioredis client per master (no offline queue, a command
 * timeout: stores/redis/connect.ts), each lock a {@link MasterPort} per master over the scripts,
 * and the algorithm of redlock/quorum.ts on top.
 */
import type { TimerClock } from '../../runtime/clock.ts';
import { ReleaseChannels } from '../redis/backend.ts';
import { connectTarget, defineScript, whenReady, type RedisClient } from '../redis/connect.ts';
import { lockKeys } from '../redis/keys.ts';
import { RELEASE_LUA, RENEW_LUA } from '../redis/scripts.ts';
import type { LockStore } from '../store.ts';
import type { RedisTarget } from '../url.ts';
import { masterPort } from './master-port.ts';
import { MASTER_TIMEOUT_MS, Outstanding, quorum, redlockBackend } from './quorum.ts';
import { REDLOCK_ACQUIRE_KEYS, REDLOCK_ACQUIRE_LUA, REDLOCK_RAISE_LUA } from './scripts.ts';

/** OPEN_WAIT_MS: how long opening waits for the masters' first connections (a master down stays down, the rest go on). */
const OPEN_WAIT_MS = 1000;

/** majorityReady resolves once a majority of the clients is ready, or `ms` have passed. */
function majorityReady(clients: readonly RedisClient[], ms: number): Promise<void> {
  return new Promise((resolve) => {
    let ready = 0;
    const need = quorum(clients.length);
    for (const c of clients)
      void whenReady(c, ms).then(() => {
        if (c.status === 'ready' && ++ready === need) resolve();
      });
    void Promise.all(clients.map((c) => whenReady(c, ms))).then(() => resolve());
  });
}

/** openRedlockStore connects to every master (in the background) and returns the store. */
export async function openRedlockStore(
  targets: readonly RedisTarget[],
  display: string,
  clock: TimerClock,
  readyWithinMs = OPEN_WAIT_MS,
): Promise<LockStore> {
  const masters = targets.map((t) => {
    const client = connectTarget(t);
    const name = t.mode === 'standalone' ? `${t.endpoint.host}:${t.endpoint.port}` : t.mode;
    return {
      name,
      client,
      channels: new ReleaseChannels(client),
      // Unbounded here: quorum.ts asks every master with its own, shorter bound.
      acquire: defineScript(client, 'fencepostRedlockAcquire', REDLOCK_ACQUIRE_KEYS, REDLOCK_ACQUIRE_LUA, name, false),
      raise: defineScript(client, 'fencepostRedlockRaise', 2, REDLOCK_RAISE_LUA, name, false),
      renew: defineScript(client, 'fencepostStoreRenew', 1, RENEW_LUA, name, false),
      release: defineScript(client, 'fencepostStoreRelease', 1, RELEASE_LUA, name, false),
    };
  });
  await majorityReady(
    masters.map((m) => m.client),
    Math.min(readyWithinMs, OPEN_WAIT_MS),
  );
  const outstanding = new Outstanding();
  return {
    kind: 'redlock',
    display,
    lock(namespace, name) {
      const keys = lockKeys(namespace, name);
      const ports = masters.map((m) =>
        masterPort({ ...m, listen: (channel, fn) => m.channels.listen(channel, fn) }, keys),
      );
      return redlockBackend(ports, { clock, outstanding });
    },
    async close() {
      // Releases done on a majority may still be out on the rest: sent, not yet answered.
      await outstanding.settled(clock, MASTER_TIMEOUT_MS);
      for (const m of masters) {
        m.channels.close();
        m.client.disconnect();
      }
      await Promise.resolve();
    },
  };
}
