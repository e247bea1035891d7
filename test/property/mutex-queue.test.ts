/**
 * The Mutex queue, whose order is the controller's and not the pods' request times, as a model test
 * of the pure controller code: decide() picks the next holder and queueStatus() keeps the record
 * (status.queue), driven by fast-check command sequences over four pods — ask, forge (the pod
 * rewrites its request time: 1970, the far future, anything), withdraw, readiness flips, release,
 * reconcile, controller crash (its own copy of the record lost; status kept), and a status write
 * lost with the crash.
 *
 * Properties:
 * - FIFO: when the controller sees each request as it is written (a reconcile after every ask,
 *   forge or withdrawal; a request withdrawn and made again before the controller looks keeps
 *   its place), grants follow the order in which the requests were made — a time rewritten while the
 *   request stays (forged, or the agent asking again) changes nothing; a request withdrawn and
 *   made again goes to the back — across crashes, since the record is read back from status.
 * - the pod's time never matters: the same sequence run twice, with every request time drawn
 *   anew (honest increasing times in one run, arbitrary ones, 1970 included, in the other),
 *   grants the same pods in the same order — also with lost status writes and with several
 *   requests first seen in one pass (pods' creation times distinct: the API server's tie-break).
 *
 * Calibration: without the record (Observation.requests always empty), FIFO fails.
 *
 * The real-process test is test/integration/controller/mutex-queue.test.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { DistributedLock, QueuedRequest } from '../../src/api/v1alpha1/distributedlock.ts';
import { decide, type Observation } from '../../src/controllers/distributedlock/decide.ts';
import { queueStatus } from '../../src/controllers/distributedlock/status.ts';
import type { PodSummary } from '../../src/controllers/distributedlock/pods.ts';
import { podKeys } from '../../src/protocol/names.ts';
import {
  aLeaseView,
  aLock,
  aPod,
  anObservation,
  createdAt,
  heldBy,
  lastHolder,
  observedAt,
  released,
  token,
  unready,
  withAnnotations,
  withLease,
  withLock,
  withPods,
  withUid,
} from '../support/builders.ts';
import { fcParams } from './settings.ts';

const PODS = 4;
const keys = podKeys('db');
const LOCK: DistributedLock = aLock('db', (d) => {
  d.spec = { ...d.spec, mode: 'Mutex' };
});

type Cmd =
  | { readonly t: 'ask'; readonly i: number }
  | { readonly t: 'forge'; readonly i: number }
  | { readonly t: 'withdraw'; readonly i: number }
  | { readonly t: 'ready'; readonly i: number; readonly ready: boolean }
  | { readonly t: 'release' }
  | { readonly t: 'reconcile'; readonly loseStatusWrite: boolean }
  | { readonly t: 'crash' };

interface Pod {
  readonly name: string;
  readonly createdAtMs: number;
  ready: boolean;
  request: string | undefined;
}

/** Sim: the pods, the Lease's holder, the controller's own copy of the record and status.queue. */
interface Sim {
  readonly pods: Pod[];
  holder: number | undefined;
  lastHolder: number | undefined;
  memory: readonly QueuedRequest[] | undefined;
  status: readonly QueuedRequest[];
  /** written: the requests in the order they were made (a rewritten time keeps the place). */
  written: number[];
  grants: number[];
  /** fifoBroken: a grant that was not the first Ready request in `written`. */
  fifoBroken: string | undefined;
}

const summary = (p: Pod): PodSummary =>
  aPod(
    p.name,
    createdAt(p.createdAtMs),
    withUid(`${p.name}-uid`),
    ...(p.ready ? [] : [unready()]),
    withAnnotations({ [keys.request]: p.request }),
  );

/**
 * run interprets the commands. `times` gives the k-th request write its time (ms since 1970);
 * `reconcileEachWrite` reconciles right after every ask, forge and withdrawal; `noRecord` hides the record
 * from decide (the calibration).
 */
function run(
  cmds: readonly Cmd[],
  createdAtMs: readonly number[],
  times: readonly number[],
  o: { readonly reconcileEachWrite: boolean; readonly noRecord?: boolean },
): Sim {
  const sim: Sim = {
    pods: createdAtMs.map((ms, i) => ({ name: `p${i}`, createdAtMs: ms, ready: true, request: undefined })),
    holder: undefined,
    lastHolder: undefined,
    memory: undefined,
    status: [],
    written: [],
    grants: [],
    fifoBroken: undefined,
  };
  let k = 0;
  const ref = (i: number) => ({ name: `p${i}`, uid: `p${i}-uid` });
  const observe = (): Observation => {
    const lease =
      sim.holder !== undefined
        ? aLeaseView(heldBy(ref(sim.holder)), token(5n), observedAt(0))
        : sim.lastHolder !== undefined
          ? aLeaseView(released('Released'), lastHolder(ref(sim.lastHolder)), token(5n), observedAt(0))
          : aLeaseView(observedAt(0));
    return {
      ...anObservation(withLock(LOCK), withLease(lease), withPods(...sim.pods.map(summary))),
      requests: o.noRecord === true ? [] : (sim.memory ?? sim.status),
    };
  };
  const reconcile = (loseStatusWrite: boolean): void => {
    const d = decide(observe(), 1);
    const grant = d.actions.find((a) => a.type === 'Grant');
    if (grant !== undefined) {
      const i = Number(grant.to.name.slice(1));
      // A freed Mutex goes to the pod that just released it only when no other request waits:
      // FIFO among the others, ready or not (a not-ready one is skipped, not passed over for it).
      const others = sim.written.filter((w) => w !== sim.lastHolder);
      const expected = (others.length > 0 ? others : sim.written).find((w) => sim.pods[w]?.ready === true);
      if (expected !== i && sim.fifoBroken === undefined)
        sim.fifoBroken = `granted p${i}, but p${expected ?? '?'} asked first (written: ${sim.written.map((w) => `p${w}`).join(' ')})`;
      sim.holder = i;
      sim.grants.push(i);
      sim.written = sim.written.filter((w) => w !== i);
    }
    // The status of the reconcile's last pass (after the grant), as the reconciler computes it.
    const queue = queueStatus(observe(), new Date(Date.UTC(2026, 11, 4))).queue ?? [];
    sim.memory = queue;
    if (!loseStatusWrite) sim.status = queue;
    else sim.memory = undefined; // the write was lost with a crash
  };
  const write = (i: number, isNew: boolean): void => {
    const p = sim.pods[i];
    if (p === undefined) return;
    p.request = new Date(times[k++ % times.length] ?? 0).toISOString();
    if (isNew) sim.written = [...sim.written, i];
    if (o.reconcileEachWrite) reconcile(false);
  };
  for (const c of cmds) {
    switch (c.t) {
      case 'ask':
        // An agent asks once, and not while it holds the lock.
        if (sim.pods[c.i]?.request === undefined && sim.holder !== c.i) write(c.i, true);
        break;
      case 'forge':
        if (sim.pods[c.i]?.request !== undefined && sim.holder !== c.i) write(c.i, false);
        break;
      case 'withdraw': {
        const p = sim.pods[c.i];
        if (p !== undefined && sim.holder !== c.i && p.request !== undefined) {
          p.request = undefined;
          sim.written = sim.written.filter((w) => w !== c.i);
          if (o.reconcileEachWrite) reconcile(false);
        }
        break;
      }
      case 'ready': {
        const p = sim.pods[c.i];
        if (p !== undefined && sim.holder !== c.i) p.ready = c.ready;
        break;
      }
      case 'release': {
        // The agent withdraws first, then releases the Lease.
        const h = sim.holder;
        const p = h !== undefined ? sim.pods[h] : undefined;
        if (p !== undefined) p.request = undefined;
        sim.lastHolder = h;
        sim.holder = undefined;
        break;
      }
      case 'reconcile':
        reconcile(c.loseStatusWrite && !o.reconcileEachWrite);
        break;
      case 'crash':
        sim.memory = undefined;
        break;
    }
  }
  return sim;
}

const pod = fc.integer({ min: 0, max: PODS - 1 });
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 4, arbitrary: pod.map((i) => ({ t: 'ask' as const, i })) },
  { weight: 2, arbitrary: pod.map((i) => ({ t: 'forge' as const, i })) },
  { weight: 1, arbitrary: pod.map((i) => ({ t: 'withdraw' as const, i })) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('ready' as const), i: pod, ready: fc.boolean() }) },
  { weight: 4, arbitrary: fc.constant({ t: 'release' as const }) },
  { weight: 4, arbitrary: fc.boolean().map((lose) => ({ t: 'reconcile' as const, loseStatusWrite: lose })) },
  { weight: 1, arbitrary: fc.constant({ t: 'crash' as const }) },
);
const commands = fc.array(cmd, { minLength: 10, maxLength: 80 });
/** createdAts: distinct creation times, in any order relative to the pods' indices. */
const createdAts = fc.uniqueArray(fc.integer({ min: 0, max: 10_000 }), { minLength: PODS, maxLength: PODS });
/** honest: strictly increasing times (a clock); forged: any distinct times, 1970 and the far future included. */
const honest = Array.from({ length: 200 }, (_, k) => Date.UTC(2026, 11, 4) + 1000 * k);
const forged = fc.uniqueArray(fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 8.64e15 })), {
  minLength: 200,
  maxLength: 200,
});

describe('the Mutex queue: the controller’s record orders the grants, never the pod’s time (a model test of the pure code)', () => {
  it('FIFO: when the controller sees each request as it is written, grants follow the order of asking, across crashes', () => {
    const tally = { sequences: 0, grants: 0, forges: 0, crashes: 0 };
    fc.assert(
      fc.property(commands, createdAts, forged, (cmds, created, times) => {
        const sim = run(cmds, created, times, { reconcileEachWrite: true });
        tally.sequences++;
        tally.grants += sim.grants.length;
        tally.forges += cmds.filter((c) => c.t === 'forge').length;
        tally.crashes += cmds.filter((c) => c.t === 'crash').length;
        expect(sim.fifoBroken).toBeUndefined();
      }),
      fcParams(500),
    );
    console.info(
      `mutex queue FIFO: ${tally.sequences} sequences, ${tally.grants} grants, ${tally.forges} forges, ${tally.crashes} crashes; 0 out of order`,
    );
  });

  it('the pod’s time never matters: honest and forged request times give the same grants, lost status writes and batched requests included', () => {
    fc.assert(
      fc.property(commands, createdAts, forged, (cmds, created, times) => {
        const a = run(cmds, created, honest, { reconcileEachWrite: false });
        const b = run(cmds, created, times, { reconcileEachWrite: false });
        expect(b.grants).toEqual(a.grants);
      }),
      fcParams(500),
    );
  });

  it('calibration: without the record (decide sees no status.queue), FIFO fails', () => {
    const out = fc.check(
      fc.property(commands, createdAts, forged, (cmds, created, times) => {
        const sim = run(cmds, created, times, { reconcileEachWrite: true, noRecord: true });
        return sim.fifoBroken === undefined;
      }),
      fcParams(500, { endOnFailure: true }), // found is enough: no shrinking
    );
    expect(out.failed).toBe(true);
  });
});
