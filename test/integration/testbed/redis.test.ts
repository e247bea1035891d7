import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';

describe('the redis-server harness', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis.stop();
  });

  it('serves a round trip on loopback', async () => {
    const c = redis.client();
    try {
      await c.set('k', 'v');
      expect(await c.get('k')).toBe('v');
      expect(await c.incr('n')).toBe(1);
    } finally {
      c.disconnect();
    }
    expect(redis.url).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
  });

  it('keeps the data through a clean restart', async () => {
    const c = redis.client();
    try {
      await c.set('kept', '1');
    } finally {
      c.disconnect();
    }
    const before = redis.process().pid;
    await redis.restart({ loseData: false });
    expect(redis.process().pid).not.toBe(before);
    const d = redis.client();
    try {
      expect(await d.get('kept')).toBe('1');
    } finally {
      d.disconnect();
    }
    expect(await redis.lostData()).toBe(false);
  });

  it('loses everything on a restart with data loss, and notices', async () => {
    const c = redis.client();
    try {
      await c.set('fence', '41');
    } finally {
      c.disconnect();
    }
    await redis.restart({ loseData: true });
    const d = redis.client();
    try {
      expect(await d.get('fence')).toBeNull();
    } finally {
      d.disconnect();
    }
    expect(await redis.lostData()).toBe(true);
  });

  it('comes back empty after a crash (SIGKILL)', async () => {
    const c = redis.client();
    try {
      await c.set('x', '1');
    } finally {
      c.disconnect();
    }
    const old = redis.process();
    await redis.crash();
    expect(await old.exited).toBe('SIGKILL');
    const d = redis.client();
    try {
      expect(await d.get('x')).toBeNull();
    } finally {
      d.disconnect();
    }
  });
});
