// Redlock waiters are woken only by a release a majority of masters published for one owner
// (redlock/quorum.ts subscribeAny): a failed attempt's give-back of a minority wakes nobody.
import { describe, expect, it } from 'vitest';
import { realClock } from '../../../src/runtime/clock.ts';
import { redlockBackend, type MasterPort } from '../../../src/stores/redlock/quorum.ts';

function masters(n: number): { ports: MasterPort[]; publish: (i: number, owner: string) => void } {
  const listeners: ((owner: string) => void)[][] = Array.from({ length: n }, () => []);
  const ports = listeners.map((ls, i): MasterPort => ({
    name: `m${i}`,
    acquire: () => Promise.resolve({ ok: false, heldForMs: 1000 }),
    raise: () => Promise.resolve(false),
    renew: () => Promise.resolve(false),
    release: () => Promise.resolve(),
    subscribe: (fn) => {
      ls.push(fn);
      return Promise.resolve(() => undefined);
    },
  }));
  return { ports, publish: (i, owner) => listeners[i]?.forEach((fn) => fn(owner)) };
}

describe('Redlock release notifications', () => {
  it('wake a waiter once a majority of the masters published one owner, once', async () => {
    const { ports, publish } = masters(5);
    const woken: string[] = [];
    await redlockBackend(ports, { clock: realClock }).subscribe((o) => woken.push(o));
    publish(0, 'loser');
    publish(1, 'loser'); // a failed attempt gave back the two masters it took: nobody wakes
    expect(woken).toEqual([]);
    publish(2, 'holder');
    publish(3, 'holder');
    expect(woken).toEqual([]);
    publish(4, 'holder'); // the holder released its majority
    expect(woken).toEqual(['holder']);
    publish(0, 'holder');
    publish(1, 'holder');
    expect(woken).toEqual(['holder']); // told once
  });
});
