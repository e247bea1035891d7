import { describe, expect, it } from 'vitest';
import {
  drawPlan,
  HANG_MS,
  observe,
  predict,
  RESTART_EXTRA_MS,
  summarizeOutages,
  formatOutageTable,
  type OutageObservation,
  type OutagePlan,
} from '../../../test/safety/faults/apiserver.ts';
import { OutageScheduler, type SharedOutage } from '../../../test/safety/faults/outage-scheduler.ts';
import { renewDeadlineOf, Terms } from '../../../test/safety/faults/apiserver-trial.ts';
import type { StampedOutput } from '../../../test/safety/workers.ts';
import { mulberry32 } from '../../../test/support/prng.ts';

const R = 666;
const outage = (
  startAt: number,
  endAt: number,
  plan: OutagePlan = { variant: 'apiserver-hang', downMs: endAt - startAt },
): SharedOutage<OutagePlan> => ({ startAt, endAt, plan, seq: 1, trials: 1 });

describe('the apiserver outage formula', () => {
  it("uses the trials' renew deadline: two thirds of the lease", () => {
    expect(renewDeadlineOf(1000)).toBe(666);
  });

  it('predicts keep well before the deadline, step-down after it, and borderline within reply latency of it', () => {
    expect(predict(400)).toBe('keep');
    expect(predict(-1)).toBe('step-down');
    expect(predict(50)).toBe('borderline');
  });

  it('draws a hang below R − P, above R, or in between, and a restart with its extra down time, from the seed', () => {
    const pick = <T>(xs: readonly T[]): T => {
      const r = mulberry32(7);
      return xs[Math.floor(r() * xs.length)] as T;
    };
    const plan = drawPlan(pick);
    expect(plan.variant.endsWith('-hang') ? HANG_MS : RESTART_EXTRA_MS).toContain(plan.downMs);
    expect(HANG_MS.some((d) => d < R - 333) && HANG_MS.some((d) => d > R)).toBe(true);
  });
});

describe('observe', () => {
  it("says a holder renewed after the outage kept its lock, with the margin from its deadline to the outage's end", () => {
    // Last renew sent at 900 (reported at 910 with 656 ms left: deadline 1566); outage 1000–1300.
    const o = observe(
      outage(1000, 1300),
      {
        deadlines: [
          { at: 910, until: 1566 },
          { at: 1310, until: 1966 },
        ],
        losses: [],
        renewedAfterEnd: true,
      },
      R,
      undefined,
    );
    expect(o).toMatchObject({
      holding: true,
      phaseMs: 100,
      marginMs: 266,
      predicted: 'keep',
      observed: 'kept',
      lostAfterMs: undefined,
    });
  });

  it('says a holder that reported lost during the outage stepped down, how long after its own deadline, and the failover from the end', () => {
    const o = observe(
      outage(1000, 3000),
      { deadlines: [{ at: 910, until: 1566 }], losses: [1570], renewedAfterEnd: false },
      R,
      3400,
    );
    expect(o).toMatchObject({
      holding: true,
      marginMs: -1434,
      predicted: 'step-down',
      observed: 'stepped-down',
      lostAfterMs: 570,
      lostVsDeadlineMs: 4,
      failoverAfterEndMs: 400,
    });
  });

  it('judges a term lost before the outage and confirmed again by its last confirmation', () => {
    const o = observe(
      outage(1000, 1300),
      {
        deadlines: [
          { at: 100, until: 766 },
          { at: 900, until: 1500 },
        ],
        losses: [770, 1510],
        renewedAfterEnd: false,
      },
      R,
      undefined,
    );
    expect(o).toMatchObject({ holding: true, observed: 'stepped-down', lostAfterMs: 510, lostVsDeadlineMs: 10 });
  });

  it('does not judge a trial whose holder had already lost its term when the outage began', () => {
    const o = observe(
      outage(1000, 1300),
      { deadlines: [{ at: 100, until: 766 }], losses: [770], renewedAfterEnd: false },
      R,
      undefined,
    );
    expect(o).toMatchObject({ holding: false, predicted: undefined, observed: 'unknown' });
  });
});

describe('summarizeOutages', () => {
  const base: OutageObservation = {
    variant: 'apiserver-hang',
    downMs: 550,
    outageMs: 551,
    seq: 1,
    trials: 3,
    holding: true,
    phaseMs: 50,
    marginMs: 60,
    predicted: 'borderline',
    observed: 'kept',
    lostAfterMs: undefined,
    lostVsDeadlineMs: undefined,
    failoverAfterEndMs: undefined,
  };
  it('counts per variant and D how often the behaviour matched the formula, leaving borderline trials undecided', () => {
    const rows = summarizeOutages([
      base,
      { ...base, marginMs: 300, predicted: 'keep', observed: 'kept' },
      {
        ...base,
        marginMs: -20,
        predicted: 'step-down',
        observed: 'stepped-down',
        lostVsDeadlineMs: 3,
        failoverAfterEndMs: 900,
      },
      {
        ...base,
        variant: 'etcd-restart',
        downMs: 0,
        outageMs: 3000,
        seq: 2,
        marginMs: 200,
        predicted: 'keep',
        observed: 'stepped-down',
      },
    ]);
    expect(rows.map((r) => [r.variant, r.downMs, r.trials, r.outages, r.matched, r.decided, r.borderline])).toEqual([
      ['apiserver-hang', 550, 3, 1, 2, 2, 1],
      ['etcd-restart', 0, 1, 1, 0, 1, 0],
    ]);
    expect(rows[0]).toMatchObject({
      kept: 2,
      steppedDown: 1,
      lostVsDeadlineMaxMs: 3,
      failoverAfterEnd: { n: 1, p50: 900, max: 900 },
    });
    expect(formatOutageTable(rows)).toContain(
      '| apiserver-hang | 550 | 3 (1) | 551 | 3 | 2 | 1 | 0 | 1 / 1 / 1 | 2 / 2 | 3 | 900 / 900 / 900 |',
    );
  });
});

describe('OutageScheduler', () => {
  const tick = (): Promise<void> =>
    new Promise((r) => {
      setTimeout(r, 5);
    });

  it("starts one outage once every admitted trial has joined, with the first joiner's plan, and tells each trial", async () => {
    const runs: string[] = [];
    const s = new OutageScheduler<string>(async (plan) => {
      runs.push(plan);
      await tick();
      return { startAt: 1, endAt: 2 };
    });
    const [a, b, c] = await Promise.all([s.admit(), s.admit(), s.admit()]);
    const pa = s.join(a, 'plan-a');
    const pb = s.join(b, 'plan-b');
    await tick();
    expect(runs).toEqual([]); // c is still setting up
    const pc = s.join(c, 'plan-c');
    const got = await Promise.all([pa, pb, pc]);
    expect(runs).toEqual(['plan-a']);
    expect(got.map((o) => [o.plan, o.trials, o.seq])).toEqual([
      ['plan-a', 3, 1],
      ['plan-a', 3, 1],
      ['plan-a', 3, 1],
    ]);
  });

  it('keeps new trials at the gate while an outage is gathered or running, and lets them form the next one', async () => {
    let finish = (): void => undefined;
    const s = new OutageScheduler<string>(
      (plan) =>
        new Promise((r) => {
          finish = () => {
            r({ startAt: plan.length, endAt: 9 });
          };
        }),
    );
    const a = await s.admit();
    const first = s.join(a, 'one');
    let admitted = false;
    const later = s.admit().then((x) => {
      admitted = true;
      return x;
    });
    await tick();
    expect(admitted).toBe(false);
    finish();
    expect((await first).seq).toBe(1);
    const b = await later;
    const second = s.join(b, 'two');
    await tick();
    finish();
    expect((await second).plan).toBe('two');
    expect(s.outages).toBe(2);
  });

  it('does not wait for a trial that left during its set-up, and starts after gatherMs for one stuck in it', async () => {
    const s = new OutageScheduler<string>(() => Promise.resolve({ startAt: 0, endAt: 1 }), 30);
    const [a, b, c] = await Promise.all([s.admit(), s.admit(), s.admit()]);
    s.leave(b);
    const o = await s.join(a, 'x'); // c never joins: gatherMs starts it anyway
    expect(o.trials).toBe(1);
    s.leave(c);
  });

  it('reports a failed outage to every trial in it', async () => {
    const s = new OutageScheduler<string>(() => Promise.reject(new Error('kube-apiserver did not start')));
    const a = await s.admit();
    await expect(s.join(a, 'x')).rejects.toThrow('did not start');
  });
});

describe('Terms (which term held when the outage began)', () => {
  const ev = (
    kind: 'granted' | 'renewed' | 'lost',
    holder: string,
    token: string,
    at: number,
    expiresInMs?: number,
  ): StampedOutput => ({ trial: 't', kind, holder, token, at, ...(expiresInMs !== undefined ? { expiresInMs } : {}) });

  it('takes the term whose last confirmation is still valid and not lost since, whichever candidate holds it', () => {
    const terms = new Terms();
    for (const e of [
      ev('granted', 'a/1', '5', 0, 600),
      ev('lost', 'a/1', '5', 650),
      ev('granted', 'b/2', '6', 1800, 600),
      ev('renewed', 'b/2', '6', 2100, 620),
    ])
      terms.add(e);
    expect(terms.heldAt(500)).toBe('a/1#5');
    expect(terms.heldAt(1000)).toBeUndefined();
    expect(terms.heldAt(2200)).toBe('b/2#6');
    expect(terms.track('b/2#6', 2000)).toEqual({
      deadlines: [
        { at: 1800, until: 2400 },
        { at: 2100, until: 2720 },
      ],
      losses: [],
      renewedAfterEnd: true,
    });
  });
});
