/**
 * The agent's store session reports the validity its hold really has: counted from when the
 * acquire request was sent, not from when its reply was handled. A real redis-server behind a
 * loopback TCP proxy that holds the acquire's reply for 600 ms: the `granted` event's and the
 * snapshot's `expiresInMs` (which the state file and the event stream carry) must show those
 * 600 ms missing from the TTL.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreLockSession } from '../../../src/agent/store-session.ts';
import type { LockEvent } from '../../../src/agent/session.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import { holdLock } from '../../../src/stores/hold.ts';
import { openStore } from '../../../src/stores/open.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';
import { startTcpProxy, type TcpProxy } from '../../support/testbed/tcp-proxy.ts';

const TTL_MS = 5000;
const DELAY_MS = 600;

let redis: RedisServer;
let proxy: TcpProxy;
beforeAll(async () => {
  redis = await startRedis();
  proxy = await startTcpProxy({ targetPort: redis.port });
});
afterAll(async () => {
  await proxy.close();
  await redis.stop();
});

describe('a store session whose acquire reply comes late', () => {
  it("reports the validity counted from the request's send: a 600 ms late reply is missing from expiresInMs", async () => {
    const lock = 'slow-reply';
    const store = await openStore(`redis://127.0.0.1:${proxy.port}`, 'store', realClock);
    const session = new StoreLockSession({
      lock,
      namespace: 'default',
      self: { name: 'pod-a', uid: 'uid-a' },
      mode: 'Mutex',
      ttlMs: TTL_MS,
      store,
      stores: { holdLock },
      clock: realClock,
      log: silentLogger,
    });
    try {
      await session.start();
      // The first command that names the lock is the acquire: its reply is held, then delivered.
      proxy.holdReplies((w) => w.includes(`fencepost:fence:default/${lock}`));
      const granted = new Promise<LockEvent>((resolve) => {
        session.onEvent((e) => {
          if (e.type === 'granted') resolve(e);
        });
      });
      await session.request();
      for (let i = 0; i < 500 && !proxy.holding; i++) await sleep(10); // bound: 5 s
      expect(proxy.holding).toBe(true);
      await sleep(DELAY_MS);
      proxy.release();
      const e = await granted;
      expect(e.expiresInMs).toBeDefined();
      expect(e.expiresInMs).toBeLessThanOrEqual(TTL_MS - DELAY_MS);
      const s = session.snapshot();
      expect(s.held).toBe(true);
      expect(s.expiresInMs).toBeLessThanOrEqual(TTL_MS - DELAY_MS);
      await session.release();
    } finally {
      proxy.heal();
      await session.stop();
      await store.close();
    }
  });
});
