/**
 * Redlock with fencing tokens (src/stores/redlock/quorum.ts), model-checked: the real algorithm
 * runs against in-memory masters (test/unit/stores/redlock-world.ts) under random sequences of
 * acquires by several clients, each master answering, down, losing the request or losing the
 * reply, releases, expiries and master restarts.
 *
 * - With restarts that keep the data (persistence), tokens strictly increase across every
 *   counted grant: what the advance-on-the-majority (then raise the max if it is not already a
 *   majority's) rule promises.
 * - With restarts that lose the data too, thanks to the epoch floor (fence-next.lua fence_epoch:
 *   a master's first token after a restart is floored at its clock), as long as the masters'
 *   clocks agree.
 * - Calibration: without the epoch floor (the scripts before it), fast-check finds a sequence
 *   where a grant's token is not above an earlier one — the property is not vacuous. What still
 *   breaks the tokens with the floor, a majority restarting empty with clocks behind, is spelled
 *   out as its own case (docs/stores.md, "What breaks Redlock tokens").
 *
 * The model is sequential: each acquire runs whole before the next step, so it checks the token
 * rule, not mutual exclusion under concurrency (that is the holder keys' job and is tested
 * against real masters in test/integration/stores/redlock.test.ts).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fcParams } from '../../property/settings.ts';
import { ModelWorld, type Fault, type WorldOptions } from './redlock-world.ts';

const TTL = 1000;

type Step =
  | {
      readonly type: 'acquire';
      readonly client: number;
      readonly acquire: readonly Fault[];
      readonly raise: readonly Fault[];
    }
  | { readonly type: 'release' }
  | { readonly type: 'expire' }
  | { readonly type: 'restart'; readonly master: number; readonly keepData: boolean };

// Mostly answering: a master fails a call one time in five, in one of three ways.
const fault: fc.Arbitrary<Fault> = fc.oneof(
  { weight: 12, arbitrary: fc.constant<Fault>('ok') },
  { weight: 1, arbitrary: fc.constant<Fault>('down') },
  { weight: 1, arbitrary: fc.constant<Fault>('dropRequest') },
  { weight: 1, arbitrary: fc.constant<Fault>('dropReply') },
);

function steps(n: number, lossyRestarts: boolean): fc.Arbitrary<Step[]> {
  return fc.array(
    fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({
          type: fc.constant('acquire' as const),
          client: fc.nat(2),
          acquire: fc.array(fault, { minLength: n, maxLength: n }),
          raise: fc.array(fault, { minLength: n, maxLength: n }),
        }),
      },
      { weight: 2, arbitrary: fc.constant({ type: 'release' as const }) },
      { weight: 2, arbitrary: fc.constant({ type: 'expire' as const }) },
      {
        weight: 3,
        arbitrary: fc.record({
          type: fc.constant('restart' as const),
          master: fc.nat(n - 1),
          keepData: lossyRestarts ? fc.boolean() : fc.constant(true),
        }),
      },
    ),
    { minLength: 15, maxLength: 40 },
  );
}

/** run plays `s` on n masters and returns the tokens of the counted grants, in order. */
async function run(n: number, s: readonly Step[], o: WorldOptions = {}): Promise<bigint[]> {
  const w = new ModelWorld(n, o);
  const tokens: bigint[] = [];
  const holders: { backend: ReturnType<ModelWorld['backend']>; owner: string }[] = [];
  let ownerSeq = 0;
  for (const step of s) {
    w.tick();
    if (step.type === 'acquire') {
      w.plan(step.acquire, step.raise);
      const backend = w.backend();
      const owner = `c${step.client}-${ownerSeq++}`;
      const a = await backend.tryAcquire(owner, TTL, 0n);
      w.plan([], []);
      if (a.granted) {
        tokens.push(a.token);
        holders.push({ backend, owner });
      }
    } else if (step.type === 'release') {
      const h = holders.shift();
      if (h !== undefined) await h.backend.release(h.owner);
    } else if (step.type === 'expire') {
      w.advance(TTL + 1);
    } else {
      w.restart(step.master, step.keepData);
    }
  }
  return tokens;
}

const increasing = (t: readonly bigint[]): boolean => t.every((v, i) => i === 0 || v > (t[i - 1] ?? -1n));

describe('Redlock tokens (model)', () => {
  it.each([3, 5])(
    'strictly increase across grants on %i masters, with failures and restarts that keep data',
    async (n) => {
      await fc.assert(
        fc.asyncProperty(steps(n, false), async (s) => {
          expect(increasing(await run(n, s))).toBe(true);
        }),
        fcParams(400),
      );
    },
  );

  it('are granted at all (the property above is not vacuous): many runs count several grants', async () => {
    const sample = fc.sample(steps(5, false), { seed: 7, numRuns: 100 });
    const counts = await Promise.all(sample.map(async (s) => (await run(5, s)).length));
    expect(counts.filter((c) => c >= 2).length).toBeGreaterThanOrEqual(25);
    expect(Math.max(...counts)).toBeGreaterThanOrEqual(5);
  });

  it.each([3, 5])('strictly increase on %i masters even when restarts lose the data: the epoch floor', async (n) => {
    await fc.assert(
      fc.asyncProperty(steps(n, true), async (s) => {
        expect(increasing(await run(n, s))).toBe(true);
      }),
      fcParams(400),
    );
  });

  it('calibration: without the epoch floor, when a master may lose acknowledged data, fast-check finds tokens that do not increase', async () => {
    const result = await fc.check(
      fc.asyncProperty(steps(5, true), async (s) => increasing(await run(5, s, { epochFloor: false }))),
      fcParams(2000),
    );
    expect(result.failed).toBe(true);
  });

  it('without the epoch floor, spelled out: the majority that saw token 1 restarts empty, and the next grant gets 1 again', async () => {
    const w = new ModelWorld(3, { epochFloor: false });
    const first = w.backend();
    w.plan(['ok', 'ok', 'down'], ['ok', 'ok', 'down']);
    const g1 = await first.tryAcquire('a', TTL, 0n);
    expect(g1).toMatchObject({ granted: true, token: 1n });
    await first.release('a');
    w.restart(0, false);
    w.restart(1, false);
    w.advance(5);
    const g2 = await w.backend().tryAcquire('b', TTL, 0n);
    expect(g2).toMatchObject({ granted: true, token: 1n, counterMissing: true }); // not above 1: a guard refuses b's writes
    // With the floor: the restarted majority floors at its clock, 5 ms = 5,000 µs later.
    const f = new ModelWorld(3);
    f.plan(['ok', 'ok', 'down'], ['ok', 'ok', 'down']);
    const a = f.backend();
    expect(await a.tryAcquire('a', TTL, 0n)).toMatchObject({ granted: true, token: 1n });
    await a.release('a');
    f.restart(0, false);
    f.restart(1, false);
    f.advance(5);
    expect(await f.backend().tryAcquire('b', TTL, 0n)).toMatchObject({
      granted: true,
      token: 5001n,
      counterMissing: true,
      clockFloored: true,
    });
  });

  it('what breaks it with the floor: a majority restarts empty with clocks further behind than the time since', async () => {
    const w = new ModelWorld(3);
    w.plan(['ok', 'ok', 'down'], ['ok', 'ok', 'down']);
    w.advance(10); // the first grant floors at 10,000 µs
    const a = w.backend();
    expect(await a.tryAcquire('a', TTL, 0n)).toMatchObject({ granted: true, token: 10001n });
    await a.release('a');
    w.advance(1);
    for (const i of [0, 1]) {
      w.restart(i, false);
      w.skew(i, -5000n); // 5 ms behind, after only 1 ms
    }
    expect(await w.backend().tryAcquire('b', TTL, 0n)).toMatchObject({ granted: true, token: 6001n }); // below 10,001
    // The same with the data kept: 2 (a restart with persistence, in the scripts before the floor).
    const k = new ModelWorld(3, { epochFloor: false });
    k.plan(['ok', 'ok', 'down'], ['ok', 'ok', 'down']);
    await k.backend().tryAcquire('a', TTL, 0n);
    k.advance(TTL + 1);
    k.restart(0, true);
    k.restart(1, true);
    k.plan([], []);
    expect(await k.backend().tryAcquire('b', TTL, 0n)).toMatchObject({ granted: true, token: 2n });
  });

  it('a restart that keeps the data floors at the clock too: a snapshot may be older than the last grant', async () => {
    const w = new ModelWorld(3);
    expect(await w.backend().tryAcquire('a', TTL, 0n)).toMatchObject({ granted: true, token: 1n, clockFloored: true });
    w.advance(TTL + 1);
    expect(await w.backend().tryAcquire('b', TTL, 0n)).toMatchObject({ granted: true, token: 2n, clockFloored: false });
    w.advance(TTL + 1);
    w.restart(0, true);
    w.restart(1, true);
    expect(await w.backend().tryAcquire('c', TTL, 0n)).toMatchObject({
      granted: true,
      token: 2002001n,
      clockFloored: true,
    });
  });

  it('a grant whose token a majority already holds counts in one round trip, with no raise', async () => {
    const w = new ModelWorld(5);
    w.plan([], ['down', 'down', 'down', 'down', 'down']); // a raise would fail: none is sent
    expect(await w.backend().tryAcquire('a', TTL, 0n)).toMatchObject({ granted: true, token: 1n });
  });

  it('a grant that must raise its token counts only when a majority acknowledged it; otherwise it is released everywhere', async () => {
    const w = new ModelWorld(5);
    const first = await w.backend().tryAcquire('x', TTL, 0n);
    if (!first.granted) throw new Error('the first grant was refused');
    await w.backend().release('x');
    // Three masters lose their counters: the next grant sees 2, 2, 1, 1, 1 — its token 2 stands
    // on two masters only, so it must be raised on the majority.
    for (const i of [2, 3, 4]) w.restart(i, false);
    w.plan([], ['ok', 'ok', 'dropReply', 'dropRequest', 'down']);
    const a = await w.backend().tryAcquire('a', TTL, 0n);
    expect(a).toMatchObject({ granted: false, held: false, reason: '2 of 5 masters acknowledged token 2, 3 needed' });
    w.plan([], []);
    expect(w.holders()).toEqual([undefined, undefined, undefined, undefined, undefined]);
    // Its partial raise is harmless: the next token is still above it.
    expect(await w.backend().tryAcquire('b', TTL, 0n)).toMatchObject({ granted: true, token: 3n });
  });

  it('the floor is respected: the token is above it even when every counter is lower', async () => {
    const w = new ModelWorld(5);
    expect(await w.backend().tryAcquire('a', TTL, 41n)).toMatchObject({ granted: true, token: 42n });
  });

  it('refuses without a majority, and says whether others hold it', async () => {
    const w = new ModelWorld(5);
    await w.backend().tryAcquire('a', TTL, 0n);
    expect(await w.backend().tryAcquire('b', TTL, 0n)).toMatchObject({ granted: false, held: true });
    const d = new ModelWorld(5);
    d.plan(['down', 'down', 'down', 'ok', 'ok'], []);
    expect(await d.backend().tryAcquire('b', TTL, 0n)).toMatchObject({
      granted: false,
      held: false,
      reason: '2 of 5 masters granted, 3 needed (0 held by another owner, 3 did not answer)',
    });
  });
});
