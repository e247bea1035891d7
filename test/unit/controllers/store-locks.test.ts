// StoreLocks (controllers/distributedlock/store-locks.ts) around the pure decision: what it keeps
// of the releases heard between two reads. A release can be heard while a read is still in flight
// that found the key held (the read reached the store just before the release did); that read
// cannot consume it, and the next read, which finds the key gone, must still know it was a release.
import { describe, expect, it } from 'vitest';
import { aLock, DEFAULT_SELECTOR } from '../../support/builders.ts';
import type { StoreRead } from '../../../src/controllers/distributedlock/decide-store.ts';
import { LockMemories } from '../../../src/controllers/distributedlock/memory.ts';
import {
  StoreLocks,
  type StoreActs,
  type StoreObserver,
} from '../../../src/controllers/distributedlock/store-locks.ts';

const lock = aLock('l', (d) => {
  d.spec = { ...d.spec, store: 'Redlock' };
});
const owner = 'r1/p1/u1';
const heldRead: StoreRead = { ok: true, owner, ttlMs: 9000, token: 5n, pod: { name: 'p1', uid: 'u1' } };
const freeRead: StoreRead = { ok: true, owner: undefined, ttlMs: -2, token: undefined, pod: undefined };

describe('StoreLocks: releases heard between reads', () => {
  it('a release heard while a read that still found the key held was in flight is reported as a release', async () => {
    const memories = new LockMemories();
    const memory = memories.of('default/l');
    // The reads in order; `during` runs while the read is in flight (the release message arriving).
    const script: { read: StoreRead; during?: () => void }[] = [
      { read: heldRead },
      { read: heldRead, during: () => StoreLocks.heard(memory, owner) },
      { read: freeRead },
      { read: freeRead },
    ];
    const observer: StoreObserver = {
      read: () => {
        const step = script.shift();
        if (step === undefined) throw new Error('no more reads scripted');
        step.during?.();
        return Promise.resolve(step.read);
      },
      onRelease: () => undefined,
      close: () => Promise.resolve(),
    };
    const events: string[] = [];
    const acts: StoreActs = {
      mark: () => Promise.resolve(),
      unmark: () => Promise.resolve(),
      writeStatus: () => Promise.resolve(),
      event: (_l, _type, reason) => {
        events.push(reason);
      },
    };
    let now = new Date('2026-12-07T00:00:00Z').getTime();
    const clock = { now: () => new Date(now), monotonicMs: () => now };
    const pods = [{ metadata: { name: 'p1', uid: 'u1', labels: { ...DEFAULT_SELECTOR.matchLabels } } }];
    const store = new StoreLocks(observer, undefined, clock);
    for (let i = 0; i < 4; i++) {
      await store.apply('default/l', lock, pods, acts, memory);
      now += 1000;
    }
    expect(events).toEqual(['StoreGranted', 'StoreReleased']);
  });
});
