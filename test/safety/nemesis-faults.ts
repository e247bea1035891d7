/**
 * The combined nemesis's fault kinds: each entry says how the schedule draws it (weight, scope,
 * variant, duration) and what it does to real processes (signals, proxies, libfaketime's offset
 * file, redis-server and controller restarts), never a call into our code. `inject` applies the
 * fault, keeps it for the planned duration and heals it; overlapping faults on one resource are
 * reference-counted by `env.hold`, so the last one to end heals it.
 *
 * To plug in a new kind (an API-server or etcd outage, HTTP-level errors, a controller HA split):
 * add one entry to NEMESIS_FAULTS. A kind on something every lock shares is `scope: 'global'` and
 * serves every lock at once (one event, many locks).
 */
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FaultKindPlan, FaultPlan } from './nemesis-schedule.ts';
import type { SafetyBed } from './testbed.ts';
import type { WorkerHandle } from './workers.ts';

/** Candidate is one candidate slot: its current worker process (replaced when killed). */
export interface Candidate {
  readonly index: number;
  worker: WorkerHandle;
}

/** NemesisEnv is what a fault kind acts through. */
export interface NemesisEnv {
  readonly bed: SafetyBed;
  readonly leaseSeconds: number;
  /**
   * hold turns a resource's fault on when the first overlapping fault takes it and off when the
   * last one releases it (e.g. `stop:<worker>`: SIGSTOP … SIGCONT); returns the release.
   */
  hold(key: string, on: () => void, off: () => void): () => void;
  /** replace SIGKILLs the candidate's process and starts a new incarnation (new pods, new uids) in its place. */
  replace(c: Candidate): Promise<void>;
}

/** NemesisFault is one pluggable fault kind. */
export interface NemesisFault extends FaultKindPlan {
  /** inject applies the fault, waits plan.durationMs and heals it; `target` is set for candidate-scoped kinds. */
  inject(env: NemesisEnv, target: Candidate | undefined, plan: FaultPlan): Promise<void>;
}

/** held applies a hold on `key` for the plan's duration. */
async function held(env: NemesisEnv, key: string, ms: number, on: () => void, off: () => void): Promise<void> {
  const release = env.hold(key, on, off);
  try {
    await sleep(ms);
  } finally {
    release();
  }
}

const candidateOf = (t: Candidate | undefined): Candidate => {
  if (t === undefined) throw new Error('candidate fault without a target');
  return t;
};

/** NEMESIS_FAULTS: the kinds of a combined nemesis run, with their relative weights. */
export const NEMESIS_FAULTS: readonly NemesisFault[] = [
  {
    // A stalled holder or candidate (GC pause, VM freeze).
    kind: 'pause',
    weight: 3,
    scope: 'candidate',
    plan: (d, L) => ({ variant: 'sigstop', durationMs: d.uniform(0.5, 3) * L }),
    async inject(env, t, p) {
      const w = candidateOf(t).worker;
      await held(
        env,
        `stop:${w.id}`,
        p.durationMs,
        () => {
          w.signal('SIGSTOP');
        },
        () => {
          w.signal('SIGCONT');
        },
      );
    },
  },
  {
    // Holder killed: the process is gone; a new incarnation (same pod names, new uids) takes its place.
    kind: 'kill',
    weight: 2,
    scope: 'candidate',
    plan: () => ({ variant: 'sigkill+new-incarnation', durationMs: 0 }),
    async inject(env, t) {
      await env.replace(candidateOf(t));
    },
  },
  {
    // A candidate cut off from the API server (both directions, every connection); the store stays reachable.
    kind: 'partition',
    weight: 3,
    scope: 'candidate',
    plan: (d, L) => ({ variant: 'api-blackhole', durationMs: d.uniform(1, 3) * L }),
    async inject(env, t, p) {
      const w = candidateOf(t).worker;
      await held(
        env,
        `api:${w.id}`,
        p.durationMs,
        () => {
          w.apiProxy.blackhole();
        },
        () => {
          w.apiProxy.heal();
        },
      );
    },
  },
  {
    // A candidate's store traffic is held in the proxy and delivered late (a delayed write arrives after others).
    kind: 'store-delay',
    weight: 2,
    scope: 'candidate',
    plan: (d, L) => ({ variant: 'hold-store-bytes', durationMs: d.uniform(1, 3) * L }),
    async inject(env, t, p) {
      const w = candidateOf(t).worker;
      await held(
        env,
        `store:${w.id}`,
        p.durationMs,
        () => {
          w.storeProxy.blackhole();
        },
        () => {
          w.storeProxy.heal();
        },
      );
    },
  },
  {
    // The wall clock is stepped (monotonic clock untouched, as an NTP step), then stepped back.
    kind: 'clock',
    weight: 2,
    scope: 'candidate',
    plan: (d, L) => ({
      variant: d.pick(['step +1L', 'step -1L', 'step +10L', 'step -10L', 'step +600s', 'step -600s']),
      durationMs: d.uniform(2, 6) * L,
    }),
    async inject(env, t, p) {
      const w = candidateOf(t).worker;
      const m = /^step ([+-])([0-9]+)(L|s)$/.exec(p.variant);
      if (m === null) throw new Error(`clock: bad variant ${p.variant}`);
      const seconds = Number(m[2]) * (m[3] === 'L' ? env.leaseSeconds : 1);
      const file = env.bed.clockFile(w.id);
      await held(
        env,
        `clock:${w.id}`,
        p.durationMs,
        () => {
          writeFileSync(file, `${m[1] ?? '+'}${seconds}\n`);
        },
        () => {
          writeFileSync(file, '+0\n');
        },
      );
    },
  },
  {
    // The token counter loses its data; the next grant must still get a larger token (etcd floor).
    kind: 'redis',
    weight: 2,
    scope: 'global',
    plan: (d) => ({ variant: d.pick(['flushall', 'restart-empty', 'crash']), durationMs: 0 }),
    async inject(env, _t, p) {
      const c = env.bed.counter;
      await env.bed.exclusive(async () => {
        if (p.variant === 'flushall') await c.flushAll();
        else if (p.variant === 'restart-empty') await c.restart({ loseData: true });
        else await c.crash();
      });
    },
  },
  {
    // The controller is SIGKILLed and a new one started (it waits a full L before re-granting an expired lease).
    kind: 'controller-kill',
    weight: 1,
    scope: 'global',
    plan: () => ({ variant: 'sigkill+restart', durationMs: 0 }),
    async inject(env) {
      await env.bed.exclusive(() => env.bed.killController());
    },
  },
];
