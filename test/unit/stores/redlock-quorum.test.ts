// The Redlock store decides at the answer that settles it (redlock/quorum.ts gather), not at the
// last master's, in the steady state (one counter value on the majority): two masters that never answer hold up neither a grant, a renew nor a holder's
// release, and the releases still out are what a store's close waits for (Outstanding).
import { describe, expect, it } from 'vitest';
import type { TimerClock } from '../../../src/runtime/clock.ts';
import { Outstanding, redlockBackend, type MasterPort } from '../../../src/stores/redlock/quorum.ts';

/** clock: a model clock whose timers never fire, so that nothing here is decided by a timeout. */
const clock: TimerClock = {
  now: () => new Date(0),
  monotonicMs: () => 0,
  setTimeout: () => {
    const t = { cancel: () => undefined, unref: () => t };
    return t;
  },
};

/** masters: `n` masters, the first `answering` of which answer at once (grant, renew, release); the rest never answer. */
function masters(n: number, answering: number): { ports: MasterPort[]; released: string[] } {
  const released: string[] = [];
  const never = new Promise<never>(() => undefined);
  const ports = Array.from({ length: n }, (_, i): MasterPort => ({
    name: `m${i}`,
    acquire: () =>
      i < answering ? Promise.resolve({ ok: true, counter: 7n, existed: true, epochChanged: false }) : never,
    raise: () => (i < answering ? Promise.resolve(true) : never),
    renew: () => (i < answering ? Promise.resolve(true) : never),
    release: (owner) => {
      if (i >= answering) return never;
      released.push(`m${i}:${owner}`);
      return Promise.resolve();
    },
    subscribe: () => Promise.resolve(() => undefined),
  }));
  return { ports, released };
}

describe('Redlock store, decided at the majority', () => {
  it('grants, renews and releases on 3 of 5 masters while 2 never answer', async () => {
    const { ports, released } = masters(5, 3);
    const outstanding = new Outstanding();
    const backend = redlockBackend(ports, { clock, outstanding });
    expect(await backend.tryAcquire('a', 1000, 0n)).toEqual({
      granted: true,
      token: 7n,
      counterMissing: false,
      clockFloored: false,
    });
    expect(await backend.renew('a', 1000)).toBe('renewed');
    await backend.release('a');
    expect(released).toEqual(['m0:a', 'm1:a', 'm2:a']);
  });

  it('waits for every master when the majority is not in the steady state (a new counter): the token is the largest of all', async () => {
    const later = <T>(v: T): Promise<T> =>
      new Promise((resolve) => {
        setTimeout(() => {
          resolve(v);
        }, 5);
      });
    const ports: MasterPort[] = masters(5, 5).ports.map((p, i) => ({
      ...p,
      // Each master floors a new counter at its own clock: the late two answer higher.
      acquire: () => {
        const a = { ok: true as const, counter: i < 3 ? 100n : 101n, existed: false, epochChanged: true };
        return i < 3 ? Promise.resolve(a) : later(a);
      },
    }));
    expect(await redlockBackend(ports, { clock }).tryAcquire('c', 1000, 0n)).toMatchObject({
      granted: true,
      token: 101n,
    });
  });

  it("refuses as soon as other owners' keys hold a majority out of reach, naming those not waited for", async () => {
    const held: MasterPort[] = masters(5, 5).ports.map((p, i) =>
      i < 3
        ? { ...p, acquire: () => Promise.resolve({ ok: false, heldForMs: 500 }) }
        : { ...p, acquire: () => new Promise<never>(() => undefined) },
    );
    expect(await redlockBackend(held, { clock }).tryAcquire('b', 1000, 0n)).toMatchObject({
      granted: false,
      held: true,
      heldForMs: 500,
      reason: '0 of 5 masters granted, 3 needed (3 held by another owner, 0 did not answer, 2 not waited for)',
    });
  });

  it("a store's close waits for the releases still out, and only for them", async () => {
    const outstanding = new Outstanding();
    let answer: (() => void) | undefined;
    const late = outstanding.track(new Promise<void>((resolve) => (answer = resolve)));
    let settled = false;
    const closing = outstanding.settled(clock, 500).then(() => (settled = true));
    await Promise.resolve();
    expect(settled).toBe(false);
    answer?.();
    await late;
    await closing;
    expect(settled).toBe(true);
    expect(await outstanding.settled(clock, 500).then(() => 'at once')).toBe('at once');
  });
});
