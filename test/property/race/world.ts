/**
 * The world of the model-based race test (docs/safety.md T18). THIS IS A MODEL TEST OF THE DECISION
 * LOGIC, not of real processes: the controller's pure `decide()` and the agent's real
 * `LockSession` (src/agent/session.ts) run against in-memory models of the Lease store, the Redis
 * token counter and a fenced store, on fake clocks, with fast-check's scheduler choosing the order
 * in which responses and watch events arrive. The real-process suite is test/safety/.
 *
 * What is real: `decide`, `parseLease`, `renewFingerprint`, `grantedLease`, `releasedLease`,
 * `resolveTimings`, and the whole `LockSession` (watch handling, confirm-by-first-renew, renew
 * loop with its deadline and retries, release). What is a model:
 * - the Lease store: one Lease, every write a compare-and-swap on its resourceVersion (409 on a
 *   mismatch), every change delivered to each agent's watch in order;
 * - the token counter: FENCE_NEXT of src/fencing/redis-fence.ts (INCR, then raised to floor + 1
 *   when not above the floor read from the Lease); a Redis restart empties it;
 * - the controller's loop around decide: a fresh GET, the observed-time bookkeeping of the
 *   reconciler (#observedAt: the expiry clock restarts when the renew fingerprint changes), the
 *   Grant (token, then CAS) and Revoke actions; a crash forgets the observed times;
 * - the application: while it believes it holds the lock it writes at every time step; and it
 *   can check `heldToken()` and send that token later (check, pause, ..., write): the stale write
 *   of T1. The fenced store accepts a token >= its mark (the guards' rule);
 * - processes: a paused agent's clock stops (its timers fire late, on resume), its watch events
 *   and responses wait; a partitioned agent's requests fail and its watch misses events (a relist
 *   on heal);
 * - a request aborted at the session's deadline (its budget) fails, or — the scheduler decides —
 *   is answered all the same, as a reply already on its way would be.
 *
 * Invariants, checked after every step: S1 (committed tokens strictly increase), S2 (the store
 * accepts tokens in increasing order, an equal token only from the same holder), S3 (no accepted
 * token below an earlier accepted one), and "at most one holder valid in the controller's view":
 * every running agent that believes it holds the lock (heldToken) is the Lease's holder with that
 * token, so there is at most one; and "a new term needs a new token" (T11): each agent's `granted`
 * reports carry strictly increasing tokens, so a term that ended is never taken up again.
 */
import { KubeConfig, type V1Lease } from '@kubernetes/client-node';
import type fc from 'fast-check';
import { LockSession, type LeaseInformer } from '../../../src/agent/session.ts';
import { resolveTimings, type DistributedLock, type Timings } from '../../../src/api/v1alpha1/distributedlock.ts';
import { decide, type Decision, type Observation } from '../../../src/controllers/distributedlock/decide.ts';
import type { PodSummary } from '../../../src/controllers/distributedlock/pods.ts';
import {
  grantedLease,
  parseLease,
  releasedLease,
  renewFingerprint,
  type LockRecord,
} from '../../../src/lease/record.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import type { ChangeHandler } from '../../../src/runtime/informer.ts';
import type { LeaseClient, LeaseRequestOptions } from '../../../src/kube/leases.ts';
import { aLock, aPod, createdAt, withLeaseSeconds } from '../../support/builders.ts';
import { FakeClock, flushAsync } from '../../support/fake-clock.ts';
import { holderIdentity, sameHolder, type HolderRef } from '../../../src/protocol/holder.ts';
import { leaseName, LOCK_LABEL } from '../../../src/protocol/names.ts';

/** Mutations remove one protection, for the calibration runs that must find a violation. */
export interface Mutations {
  /** noFloor: the counter is a bare INCR (no etcd high-water-mark floor). */
  readonly noFloor?: boolean;
  /** staleView: decide() is given an observed time that ignores renewals (a stale view of the Lease). */
  readonly staleView?: boolean;
  /** noGuard: the store accepts any token. */
  readonly noGuard?: boolean;
}

/** Violation is an invariant broken; the message says which and how. */
export class Violation extends Error {
  readonly invariant: string;
  constructor(invariant: string, message: string) {
    super(`${invariant}: ${message}`);
    this.name = 'Violation';
    this.invariant = invariant;
  }
}

const NAMESPACE = 'default';
const LOCK = 'db';
/** LEASE_SECONDS: L = 3 s, so R = 2 s and P = 1 s (resolveTimings' defaults). */
const LEASE_SECONDS = 3;
/** STEP_MS: time moves in steps this long; responses and events are delivered between steps. */
export const STEP_MS = 50;
/** AGENTS: how many candidate pods there are. */
export const AGENTS = 3;

const conflict = (): Error =>
  Object.assign(new Error('Operation cannot be fulfilled on leases: the object has been modified'), {
    statusCode: 409,
  });
const unreachable = (who: string): Error => new Error(`connect ETIMEDOUT (${who} is partitioned)`);

/** LeaseStore is the model of the API server for one Lease: compare-and-swap writes and a watch. */
class LeaseStore {
  #lease: V1Lease;
  #rv: number;
  readonly #watchers: ((lease: V1Lease) => void)[] = [];

  constructor(firstRv: number) {
    this.#rv = firstRv;
    this.#lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: leaseName(LOCK),
        namespace: NAMESPACE,
        resourceVersion: String(firstRv),
        labels: { [LOCK_LABEL]: LOCK },
      },
      spec: {},
    };
  }

  read(): V1Lease {
    return this.#lease;
  }

  /** replace is the CAS: the body must carry the current resourceVersion. */
  replace(body: V1Lease): V1Lease {
    if (body.metadata?.resourceVersion !== this.#lease.metadata?.resourceVersion) throw conflict();
    this.#rv += 1;
    this.#lease = { ...body, metadata: { ...body.metadata, resourceVersion: String(this.#rv) } };
    for (const w of this.#watchers) w(this.#lease);
    return this.#lease;
  }

  watch(w: (lease: V1Lease) => void): void {
    this.#watchers.push(w);
  }
}

/** Counter is the model of the Redis dispenser's FENCE_NEXT (src/fencing/redis-fence.ts). */
class Counter {
  #value: bigint | undefined;
  readonly noFloor: boolean;
  constructor(noFloor: boolean) {
    this.noFloor = noFloor;
  }
  next(floor: bigint): bigint {
    let v = (this.#value ?? 0n) + 1n;
    if (!this.noFloor && v <= floor) v = floor + 1n;
    this.#value = v;
    return v;
  }
  /** reset is a Redis restart without persistence: the counter key is gone. */
  reset(): void {
    this.#value = undefined;
  }
}

/** Accept is one write the fenced store applied. */
interface Accept {
  readonly token: bigint;
  readonly agent: number;
}

/** Agent is one candidate pod: a real LockSession on its own fake clock, and its application. */
class Agent {
  readonly ref: HolderRef;
  readonly clock = new FakeClock();
  readonly session: LockSession;
  candidate = false;
  paused = false;
  partitioned = false;
  /** owedMs: time that passed while paused, added to the clock on resume (timers fire late). */
  owedMs = 0;
  /** pending: a token the application checked and has not written yet. */
  pending: bigint | undefined;
  readonly #handlers: ChangeHandler<V1Lease>[] = [];
  readonly #events: V1Lease[] = [];
  #missed = false;
  readonly #gates: (() => void)[] = [];

  readonly index: number;
  readonly store: LeaseStore;
  readonly s: fc.Scheduler;

  constructor(index: number, store: LeaseStore, s: fc.Scheduler) {
    this.index = index;
    this.store = store;
    this.s = s;
    this.ref = { name: `web-${index}`, uid: `uid-${index}` };
    const informer: LeaseInformer = {
      start: () => Promise.resolve(),
      get: () => (this.partitioned ? undefined : store.read()),
      onChange: (h) => {
        this.#handlers.push(h);
      },
      stop: () => Promise.resolve(),
    };
    const call = (what: string, op: () => V1Lease, opts?: LeaseRequestOptions): Promise<V1Lease> =>
      this.#call(what, op, opts);
    const leases: LeaseClient = {
      get: (_ns, _name, opts) => call('get', () => store.read(), opts),
      replace: (_ns, _name, lease, opts) => call('replace', () => store.replace(lease), opts),
      create: () => Promise.reject(new Error('agents do not create Leases')),
    };
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'model', server: 'http://127.0.0.1:9' }],
      users: [{ name: 'model' }],
      contexts: [{ name: 'model', cluster: 'model', user: 'model' }],
      currentContext: 'model',
    });
    this.session = new LockSession({
      kc,
      namespace: NAMESPACE,
      lock: LOCK,
      self: this.ref,
      clock: this.clock,
      log: silentLogger,
      leases,
      leaseInformer: informer,
      random: () => 0.5,
    });
    store.watch((lease) => {
      this.#onWatch(lease);
    });
  }

  /**
   * #call: the request reaches the store at once (the agent is running when it sends); the
   * response comes back when the scheduler says, and not before the agent runs again; a partition
   * loses it. An aborted request (the session's budget timer) fails when its response would arrive.
   */
  async #call(what: string, op: () => V1Lease, opts?: LeaseRequestOptions): Promise<V1Lease> {
    if (this.partitioned) {
      await this.s.schedule(Promise.resolve(), `${this.ref.name} ${what} fails (partitioned)`);
      throw unreachable(this.ref.name);
    }
    let result: { ok: true; lease: V1Lease } | { ok: false; err: unknown };
    try {
      result = { ok: true, lease: op() };
    } catch (err) {
      result = { ok: false, err };
    }
    await this.s.schedule(Promise.resolve(), `${this.ref.name} ${what} response`);
    await this.#running();
    if (this.partitioned) throw unreachable(this.ref.name);
    if (opts?.signal?.aborted === true && !(await this.#replyBeatsAbort(what)))
      throw opts.signal.reason instanceof Error ? opts.signal.reason : new Error('aborted');
    if (!result.ok) throw result.err;
    return result.lease;
  }

  /**
   * #replyBeatsAbort: a request aborted at the session's deadline may still be answered, when the
   * reply was already on its way (a real HTTP client can settle either way). The scheduler picks
   * which of the two comes first.
   */
  async #replyBeatsAbort(what: string): Promise<boolean> {
    return await Promise.race([
      this.s.schedule(Promise.resolve(true), `${this.ref.name} ${what} reply beats the abort`),
      this.s.schedule(Promise.resolve(false), `${this.ref.name} ${what} abort beats the reply`),
    ]);
  }

  #running(): Promise<void> {
    return this.paused
      ? new Promise((resolve) => {
          this.#gates.push(resolve);
        })
      : Promise.resolve();
  }

  /** #onWatch: the watch delivers changes in order, each when the scheduler says. */
  #onWatch(lease: V1Lease): void {
    if (this.partitioned) {
      this.#missed = true;
      return;
    }
    this.#events.push(lease);
    void this.s
      .schedule(Promise.resolve(), `${this.ref.name} watch event`)
      .then(() => this.#running())
      .then(() => {
        this.#deliverNext();
      });
  }

  #deliverNext(): void {
    const lease = this.#events.shift();
    if (lease === undefined || this.partitioned) return;
    for (const h of this.#handlers) h(lease, 'update');
  }

  async start(): Promise<void> {
    await this.session.start();
  }

  pause(): void {
    this.paused = true;
  }

  async resume(): Promise<void> {
    if (!this.paused) return;
    this.paused = false;
    const owed = this.owedMs;
    this.owedMs = 0;
    await this.clock.advanceAsync(owed); // the deadline timer fires, late
    for (const open of this.#gates.splice(0)) open();
    await flushAsync();
  }

  partition(): void {
    this.partitioned = true;
  }

  /** heal: the informer relists: the current Lease is delivered as one update. */
  heal(): void {
    if (!this.partitioned) return;
    this.partitioned = false;
    this.#events.length = 0;
    if (this.#missed) {
      this.#missed = false;
      this.#onWatch(this.store.read());
    }
  }

  /** advance moves this process's clock (or owes it the time while paused). */
  async advance(ms: number): Promise<void> {
    if (this.paused) {
      this.owedMs += ms;
      return;
    }
    await this.clock.advanceAsync(ms);
  }

  /** believes: the application asks whether it holds the lock (a running agent only). */
  believes(): bigint | undefined {
    return this.paused ? undefined : this.session.heldToken();
  }

  pod(): PodSummary {
    return aPod(this.ref.name, createdAt(1_000 + this.index), (d) => {
      d.ref = this.ref;
      d.ready = this.candidate;
    });
  }
}

/** Controller runs the real decide() in a model of the reconciler's loop. */
class Controller {
  readonly clock = new FakeClock();
  up = true;
  #seen: { fingerprint: string; atMs: number } | undefined;
  #nextAtMs = 0;

  readonly w: World;
  constructor(w: World) {
    this.w = w;
  }

  crash(): void {
    this.up = false;
    this.#seen = undefined;
  }
  restart(): void {
    if (!this.up) {
      this.up = true;
      this.#nextAtMs = this.clock.monotonicMs();
    }
  }
  due(): boolean {
    return this.up && this.clock.monotonicMs() >= this.#nextAtMs;
  }

  /** #observedAt is the reconciler's: restart the expiry clock when the renew fingerprint changes. */
  #observedAt(record: LockRecord): number {
    // The stale view (a mutation) misses renewals: only a change of holder or token counts.
    const fingerprint =
      this.w.mutations.staleView === true
        ? [record.holder !== undefined ? holderIdentity(record.holder) : '', record.token ?? ''].join('|')
        : renewFingerprint(record);
    if (this.#seen?.fingerprint === fingerprint) return this.#seen.atMs;
    this.#seen = { fingerprint, atMs: this.clock.monotonicMs() };
    return this.#seen.atMs;
  }

  /**
   * reconcile: a fresh GET, decide, and the Lease action (Grant: a token from the counter, then
   * the CAS; Revoke: the CAS). `crashAfterToken` stops the controller between the two steps of a
   * grant (T6). The GET and each write are separate steps the scheduler may interleave with agents.
   */
  async reconcile(crashAfterToken = false): Promise<Decision | undefined> {
    if (!this.up) return undefined;
    await this.w.s.schedule(Promise.resolve(), 'controller GET');
    if (!this.up) return undefined;
    const lease = this.w.store.read();
    const record = parseLease(lease);
    const obs: Observation = {
      lock: this.w.lock,
      timings: this.w.timings,
      lease: { record, observedAtMs: this.#observedAt(record) },
      pods: this.w.agents.map((a) => a.pod()),
      podsSynced: true,
      fencing: { backend: 'Redis', ready: true },
    };
    const dec = decide(obs, this.clock.monotonicMs());
    this.#nextAtMs = this.clock.monotonicMs() + Math.max(STEP_MS, Math.min(dec.requeueAfterMs, 1000));
    for (const action of dec.actions) {
      if (action.type === 'Grant') {
        const token = this.w.counter.next(action.floor);
        this.w.issued.push(token);
        if (crashAfterToken) {
          this.crash();
          return dec;
        }
        await this.w.s.schedule(Promise.resolve(), 'controller grant CAS');
        if (!this.up) return dec;
        let stored = false;
        try {
          this.w.store.replace(grantedLease(lease, action.to, token, this.w.timings, this.clock.now()));
          stored = true;
        } catch {
          /* 409: decide again next time */
        }
        if (stored) this.w.committed(token, action.to); // outside the try: a Violation must not pass for a 409
      } else if (action.type === 'Revoke') {
        await this.w.s.schedule(Promise.resolve(), 'controller revoke CAS');
        if (!this.up) return dec;
        try {
          this.w.store.replace(releasedLease(lease, action.cause === 'Expired' ? 'Expired' : 'Terminated'));
        } catch {
          /* 409 */
        }
      }
    }
    return dec;
  }
}

/** World holds every part of one run and checks the invariants. */
export class World {
  readonly lock: DistributedLock = aLock(LOCK, withLeaseSeconds(LEASE_SECONDS));
  readonly timings: Timings = resolveTimings(this.lock.spec);
  readonly store = new LeaseStore(100);
  readonly counter: Counter;
  readonly agents: Agent[];
  readonly controller: Controller;
  readonly issued: bigint[] = [];
  readonly grants: { token: bigint; holder: HolderRef }[] = [];
  readonly accepts: Accept[] = [];
  #mark: bigint | undefined;
  /** rejected: stale writes the store refused (the fencing at work). */
  rejected = 0;
  /** lostTerms: terms that agents ended as lost (deadline, revoked, superseded). */
  lostTerms = 0;
  /** #reusedTerm: the first `granted` report whose token was not above that agent's previous one. */
  #reusedTerm: string | undefined;
  /** log: what happened, for the failure message. */
  readonly log: string[] = [];

  readonly s: fc.Scheduler;
  readonly mutations: Mutations;

  constructor(s: fc.Scheduler, mutations: Mutations = {}) {
    this.s = s;
    this.mutations = mutations;
    this.counter = new Counter(mutations.noFloor === true);
    this.agents = Array.from({ length: AGENTS }, (_, i) => new Agent(i, this.store, s));
    this.controller = new Controller(this);
  }

  async start(): Promise<void> {
    for (const a of this.agents) {
      let lastGranted = -1n;
      a.session.onEvent((e) => {
        if (e.type === 'lost') this.lostTerms += 1;
        if (e.type !== 'granted') return;
        // Listeners must not throw: the violation is raised by the next check().
        if (BigInt(e.token) <= lastGranted)
          this.#reusedTerm ??= `${a.ref.name} was granted token ${e.token} after it had been granted ${lastGranted}`;
        lastGranted = BigInt(e.token);
      });
      await a.start();
    }
  }

  /** committed records a grant the Lease accepted, and checks S1. */
  committed(token: bigint, holder: HolderRef): void {
    const last = this.grants.at(-1);
    this.grants.push({ token, holder });
    this.log.push(`grant ${token} to ${holder.name}`);
    if (last !== undefined && token <= last.token) {
      throw new Violation(
        'S1',
        `token ${token} granted to ${holder.name} is not above the previous grant's ${last.token} (to ${last.holder.name})`,
      );
    }
  }

  /** write sends the application's write with `token` to the fenced store, and checks S2/S3. */
  write(agent: number, token: bigint): void {
    const mark = this.#mark;
    if (this.mutations.noGuard !== true && mark !== undefined && token < mark) {
      this.rejected += 1;
      this.log.push(`web-${agent} write ${token} rejected (mark ${mark})`);
      return;
    }
    const last = this.accepts.at(-1);
    const max = this.accepts.reduce<bigint | undefined>(
      (m, a) => (m === undefined || a.token > m ? a.token : m),
      undefined,
    );
    this.accepts.push({ token, agent });
    this.#mark = mark === undefined || token > mark ? token : mark;
    this.log.push(`web-${agent} write ${token} accepted`);
    if (max !== undefined && token < max)
      throw new Violation('S3', `web-${agent}'s write with token ${token} accepted after token ${max}`);
    if (last !== undefined && (token < last.token || (token === last.token && last.agent !== agent))) {
      throw new Violation(
        'S2',
        `web-${agent}'s write with token ${token} accepted right after web-${last.agent}'s with token ${last.token}`,
      );
    }
  }

  /** settle lets every scheduled response and watch event arrive, in the scheduler's order. */
  async settle(): Promise<void> {
    for (let i = 0; i < 1000; i++) {
      await flushAsync();
      if (this.s.count() === 0) return;
      await this.s.waitOne();
    }
    throw new Error('the model did not settle within 1000 scheduled tasks');
  }

  /**
   * alongside settles the world while `p` runs (p may wait on scheduled responses) and then
   * returns p's result; p's rejection (a Violation) is caught at once, never left unhandled.
   */
  async alongside<T>(p: Promise<T>): Promise<T> {
    const caught = p.then(
      (value) => ({ ok: true as const, value }),
      (err: unknown) => ({ ok: false as const, err }),
    );
    await this.settle();
    const r = await caught;
    if (!r.ok) throw r.err;
    return r.value;
  }

  /** tick moves time by `ms` in steps, reconciling when the controller's requeue is due; checks after every step. */
  async tick(ms: number): Promise<void> {
    for (let left = ms; left > 0; left -= STEP_MS) {
      const step = Math.min(STEP_MS, left);
      for (const a of this.agents) await a.advance(step);
      this.controller.clock.advance(step);
      await this.settle();
      this.check();
      // Each application writes while it believes it holds the lock (as the safety suite's
      // writer loop does), so a stale token sent later meets the successor's mark.
      for (const a of this.agents) {
        const t = a.believes();
        if (t !== undefined) this.write(a.index, t);
      }
      if (this.controller.due()) {
        await this.alongside(this.controller.reconcile());
        this.check();
      }
    }
  }

  /** check: at most one running agent believes it holds the lock, and it is the Lease's holder with that token. */
  check(): void {
    if (this.#reusedTerm !== undefined) throw new Violation('new-term-new-token', this.#reusedTerm);
    const record = parseLease(this.store.read());
    const believers = this.agents.flatMap((a) => {
      const t = a.believes();
      return t === undefined ? [] : [{ a, t }];
    });
    for (const { a, t } of believers) {
      if (!sameHolder(record.holder, a.ref) || record.token !== t) {
        throw new Violation(
          'one-holder',
          `${a.ref.name} believes it holds token ${t}, but the Lease names ${record.holder?.name ?? 'nobody'} with token ${String(record.token)}`,
        );
      }
    }
    if (believers.length > 1)
      throw new Violation(
        'one-holder',
        `${believers.map((b) => b.a.ref.name).join(' and ')} both believe they hold the lock`,
      );
  }
}
