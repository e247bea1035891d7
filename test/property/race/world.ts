/**
 * The world of the model-based race test (docs/safety.md). THIS IS A MODEL TEST: the real
 * controller (`DistributedLockReconciler`, with its decide(), observed-time bookkeeping and grant
 * order) and the agent's real `LockSession` (src/agent/session.ts) run against an in-memory API
 * server (test/support/memory-cluster.ts), a model of the Redis token counter and a fenced store,
 * on fake clocks, with fast-check's scheduler choosing the order in which requests take effect,
 * responses arrive and watch events are delivered. The real-process suite is test/safety/.
 *
 * What is real: the whole reconciler (finalizer, cache read then fresh GET, decide, token, CAS,
 * pod marks, status), the whole `LockSession` (watch handling, confirm-by-first-renew, renew loop
 * with its deadline and retries, release, hand-back — the term logic being the holder core,
 * src/runtime/holder.ts, that every holder loop runs), and the Lease record functions both use.
 * What is a model:
 * - the API server: one namespace; every Lease write a compare-and-swap on its resourceVersion
 *   (409 on a mismatch), every change delivered to each agent's watch in order; pods with a uid
 *   precondition on patches; the controller's informer caches always current;
 * - the token counter: FENCE_NEXT of src/fencing/redis-fence.ts (INCR, then raised to floor + 1
 *   when not above the floor read from the Lease); a Redis restart empties it;
 * - the controller process: each call of its ports waits for the scheduler before it takes effect;
 *   a crash (SIGKILL) can come before any one of them (before the CAS: a token taken and never
 *   recorded, a gap that must never be reused; before the pod mark; before the status write); the
 *   replacement is a new reconciler that has observed nothing;
 * - the application: while it believes it holds the lock it writes at every time step; and it can
 *   check `heldToken()` and send that token later (check, pause, ..., write): the stale write of a
 *   holder paused past its lease. The fenced store accepts a token >= its mark (the guards' rule);
 * - processes: a paused agent's clock stops (its timers fire late, on resume), its watch events
 *   and responses wait; a partitioned agent's requests fail and its watch misses events (a relist
 *   on heal);
 * - a request aborted at the session's deadline (its budget) fails, or — the scheduler decides —
 *   is answered all the same, as a reply already on its way would be.
 *
 * Invariants, checked after every step: S1 (committed tokens strictly increase), S2 (the store
 * accepts tokens in increasing order, an equal token only from the same holder), S3 (no accepted
 * token below an earlier accepted one), "at most one holder valid in the controller's view": every
 * running agent that believes it holds the lock (heldToken) is the Lease's holder with that token,
 * so there is at most one; "a new term needs a new token" (a step-down is final): each agent's
 * `granted` reports carry strictly increasing tokens; and "marks follow commits": a pod annotated
 * with a token (and so selected by a holder Service) holds a grant the Lease committed to that very
 * pod.
 */

import type { V1Lease } from '@kubernetes/client-node';
import type fc from 'fast-check';
import { LockSession, type LeaseInformer } from '../../../src/agent/session.ts';
import type { DistributedLock } from '../../../src/api/v1alpha1/distributedlock.ts';
import { DistributedLockReconciler } from '../../../src/controllers/distributedlock/reconciler.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { sameHolder, type HolderRef } from '../../../src/protocol/holder.ts';
import { leaseName, podKeys } from '../../../src/protocol/names.ts';
import type { ChangeHandler } from '../../../src/runtime/informer.ts';
import type { LeaseClient, LeaseRequestOptions } from '../../../src/runtime/leaderelection.ts';
import { aLock, neverRecorded, withLeaseSeconds } from '../../support/builders.ts';
import { apiClientFor } from '../../support/api-client.ts';
import { FakeClock, flushAsync } from '../../support/fake-clock.ts';
import { MemoryCluster, type Operation, type Step } from '../../support/memory-cluster.ts';

/** Mutations remove one protection, for the calibration runs that must find a violation. */
export interface Mutations {
  /** noFloor: the counter is a bare INCR (no etcd high-water-mark floor). */
  readonly noFloor?: boolean;
  /** staleView: the controller reads Leases whose renewTime never moves past acquireTime (a view that misses renewals). */
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
const LEASE = leaseName(LOCK);
/** LEASE_SECONDS: L = 3 s, so R = 2 s and P = 1 s (resolveTimings' defaults). */
const LEASE_SECONDS = 3;
/** STEP_MS: time moves in steps this long; responses and events are delivered between steps. */
export const STEP_MS = 50;
/** AGENTS: how many candidate pods there are. */
export const AGENTS = 3;

const unreachable = (who: string): Error => new Error(`connect ETIMEDOUT (${who} is partitioned)`);

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
  paused = false;
  partitioned = false;
  /** owedMs: time that passed while paused, added to the clock on resume (timers fire late). */
  owedMs = 0;
  /** pending: a token the application checked and has not written yet. */
  pending: bigint | undefined;
  readonly #handlers: ChangeHandler<V1Lease>[] = [];
  readonly #events: { lease: V1Lease; kind: 'update' | 'delete' }[] = [];
  /** #lastDelivered: the last Lease this agent's watch delivered (a relist reports it deleted when it is gone). */
  #lastDelivered: V1Lease | undefined;
  #missed = false;
  readonly #gates: (() => void)[] = [];

  readonly index: number;
  readonly cluster: MemoryCluster;
  readonly s: fc.Scheduler;
  #candidate = false;

  constructor(index: number, cluster: MemoryCluster, s: fc.Scheduler) {
    this.index = index;
    this.cluster = cluster;
    this.s = s;
    this.ref = { name: `web-${index}`, uid: `uid-${index}` };
    this.#putPod();
    const informer: LeaseInformer = {
      start: () => Promise.resolve(),
      get: () => (this.partitioned ? undefined : cluster.lease(LEASE)),
      onChange: (h) => {
        this.#handlers.push(h);
      },
      stop: () => Promise.resolve(),
    };
    const call = (what: string, op: () => V1Lease, opts?: LeaseRequestOptions): Promise<V1Lease> =>
      this.#call(what, op, opts);
    const read = (): V1Lease => {
      const l = cluster.lease(LEASE);
      if (l === undefined) throw new Error(`Lease ${LEASE} is gone`);
      return l;
    };
    const leases: LeaseClient = {
      get: (_ns, _name, opts) => call('get', read, opts),
      replace: (_ns, _name, lease, opts) => call('replace', () => cluster.replaceLease(LEASE, lease), opts),
      create: () => Promise.reject(new Error('agents do not create Leases')),
    };
    this.session = new LockSession({
      api: apiClientFor('http://127.0.0.1:9'),
      namespace: NAMESPACE,
      lock: LOCK,
      self: this.ref,
      clock: this.clock,
      log: silentLogger,
      leases,
      leaseInformer: informer,
      random: () => 0.5,
    });
    cluster.onLeaseChange((lease, kind) => {
      this.#onWatch(lease, kind);
    });
  }

  /** candidate: the pod is Ready, so the lock (Election mode) may grant it. */
  get candidate(): boolean {
    return this.#candidate;
  }
  set candidate(ready: boolean) {
    this.#candidate = ready;
    this.#putPod();
  }

  #putPod(): void {
    this.cluster.putPod({
      ref: this.ref,
      labels: { app: 'web' },
      createdAt: new Date(1_000 + this.index),
      ready: this.#candidate,
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
  #onWatch(lease: V1Lease, kind: 'update' | 'delete'): void {
    if (this.partitioned) {
      this.#missed = true;
      return;
    }
    this.#events.push({ lease, kind });
    void this.s
      .schedule(Promise.resolve(), `${this.ref.name} watch event`)
      .then(() => this.#running())
      .then(() => {
        this.#deliverNext();
      });
  }

  #deliverNext(): void {
    const e = this.#events.shift();
    if (e === undefined || this.partitioned) return;
    this.#lastDelivered = e.kind === 'update' ? e.lease : undefined;
    for (const h of this.#handlers) h(e.lease, e.kind);
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

  /** heal: the informer relists: the current Lease is delivered as one update, or a gone one as a delete. */
  heal(): void {
    if (!this.partitioned) return;
    this.partitioned = false;
    this.#events.length = 0;
    if (this.#missed) {
      this.#missed = false;
      const lease = this.cluster.lease(LEASE);
      if (lease !== undefined) this.#onWatch(lease, 'update');
      else if (this.#lastDelivered !== undefined) this.#onWatch(this.#lastDelivered, 'delete');
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
}

/**
 * Controller is the controller process: the real DistributedLockReconciler over the cluster's
 * ports, each call waiting for the scheduler before it takes effect. A crash aborts the reconcile's
 * signal and fails its next call; the restarted process is a new reconciler that has observed
 * nothing (it waits a full lease duration before expiring anyone).
 */
class Controller {
  readonly clock = new FakeClock();
  up = true;
  #reconciler: DistributedLockReconciler;
  #abort = new AbortController();
  #nextAtMs = 0;
  /** #crashBefore: the next reconcile crashes right before this operation takes effect. */
  #crashBefore: Operation | undefined;
  #reconciles = 0;

  readonly w: World;
  constructor(w: World) {
    this.w = w;
    this.#reconciler = this.#newReconciler();
  }

  #newReconciler(): DistributedLockReconciler {
    const abort = this.#abort;
    const gate = async (step: Step): Promise<void> => {
      if (this.#crashBefore === step.op) {
        this.#crashBefore = undefined;
        this.crash();
      }
      if (abort.signal.aborted) throw new Error(`controller crashed before ${step.op}`);
      await this.w.s.schedule(Promise.resolve(), `controller ${step.op} ${step.name}`);
      if (abort.signal.aborted) throw new Error(`controller crashed before ${step.op}`);
    };
    return new DistributedLockReconciler(
      this.w.cluster.reconcilerDeps({
        gate,
        clock: this.clock,
        log: silentLogger,
        ...(this.w.mutations.staleView === true ? { leaseView: missRenewals } : {}),
      }),
    );
  }

  crash(): void {
    if (!this.up) return;
    this.up = false;
    this.#abort.abort(new Error('controller crashed'));
  }
  restart(): void {
    if (this.up) return;
    this.up = true;
    this.#abort = new AbortController();
    this.#reconciler = this.#newReconciler();
    this.#nextAtMs = this.clock.monotonicMs();
  }
  due(): boolean {
    return this.up && this.clock.monotonicMs() >= this.#nextAtMs;
  }

  /**
   * reconcile runs one reconcile of the lock; `crashBefore` kills the process right before that
   * operation takes effect (if this reconcile reaches it). A failed reconcile (a 409 on the CAS, a
   * crash) is retried a step later, as the work queue would.
   */
  async reconcile(crashBefore?: Operation): Promise<void> {
    if (!this.up) return;
    this.#crashBefore = crashBefore;
    this.#reconciles += 1;
    const signal = this.#abort.signal;
    try {
      const r = await this.#reconciler.reconcile(`${NAMESPACE}/${LOCK}`, {
        reconcileId: `r${this.#reconciles}`,
        logFields: {
          controller: 'distributedlock',
          controllerGroup: 'fencepost.io',
          controllerKind: 'DistributedLock',
          namespace: NAMESPACE,
          name: LOCK,
          reconcileID: `r${this.#reconciles}`,
        },
        signal,
      });
      this.#nextAtMs = this.clock.monotonicMs() + Math.max(STEP_MS, Math.min(r.requeueAfterMs ?? STEP_MS, 1000));
    } catch {
      this.#nextAtMs = this.clock.monotonicMs() + STEP_MS;
    } finally {
      this.#crashBefore = undefined;
    }
  }
}

/** missRenewals is the stale view of the calibration: the Lease as if never renewed since its grant. */
function missRenewals(lease: V1Lease): V1Lease {
  const spec = lease.spec ?? {};
  return { ...lease, spec: { ...spec, ...(spec.acquireTime !== undefined ? { renewTime: spec.acquireTime } : {}) } };
}

/** World holds every part of one run and checks the invariants. */
export class World {
  readonly lock: DistributedLock = { ...aLock(LOCK, withLeaseSeconds(LEASE_SECONDS), neverRecorded()) };
  readonly cluster: MemoryCluster;
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
  /** #violation: the first invariant broken inside a callback (raised by the next check()). */
  #violation: Violation | undefined;
  /** log: what happened, for the failure message. */
  readonly log: string[] = [];

  readonly s: fc.Scheduler;
  readonly mutations: Mutations;

  constructor(s: fc.Scheduler, mutations: Mutations = {}) {
    this.s = s;
    this.mutations = mutations;
    this.cluster = new MemoryCluster({ namespace: NAMESPACE, noFloor: mutations.noFloor === true });
    this.cluster.putLock({ ...this.lock, metadata: { ...this.lock.metadata, resourceVersion: '1' } });
    this.cluster.emptyLockLease(LOCK);
    let committedToken: bigint | undefined;
    this.cluster.onLeaseChange((lease, kind) => {
      if (kind === 'delete') {
        this.log.push('Lease deleted');
        return;
      }
      const record = parseLease(lease);
      if (record.holder === undefined || record.token === undefined || record.token === committedToken) return;
      committedToken = record.token;
      this.committed(record.token, record.holder);
    });
    this.agents = Array.from({ length: AGENTS }, (_, i) => new Agent(i, this.cluster, s));
    this.controller = new Controller(this);
  }

  /** counter is the Redis token counter. */
  get counter(): MemoryCluster['counter'] {
    return this.cluster.counter;
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

  /** deleteLease: someone deletes the lock's Lease. */
  deleteLease(): void {
    this.cluster.deleteLease(LEASE);
  }

  /** committed records a grant the Lease accepted, and checks S1 (reported by the next check()). */
  committed(token: bigint, holder: HolderRef): void {
    const last = this.grants.at(-1);
    this.grants.push({ token, holder });
    this.log.push(`grant ${token} to ${holder.name}`);
    if (last !== undefined && token <= last.token) {
      this.#violation ??= new Violation(
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
    if (this.#violation !== undefined) throw this.#violation;
    if (this.#reusedTerm !== undefined) throw new Violation('new-term-new-token', this.#reusedTerm);
    this.#checkMarks();
    const believers = this.agents.flatMap((a) => {
      const t = a.believes();
      return t === undefined ? [] : [{ a, t }];
    });
    // Whatever happened to the Lease (deleted by someone), a believer holds the last grant made.
    const last = this.grants.at(-1);
    for (const { a, t } of believers) {
      if (last === undefined || !sameHolder(last.holder, a.ref) || last.token !== t)
        throw new Violation(
          'one-holder',
          `${a.ref.name} believes it holds token ${t}, but the last grant was ${last !== undefined ? `token ${last.token} to ${last.holder.name}` : 'none'}`,
        );
    }
    // And it is the Lease's holder with that token — unless the Lease was deleted and is gone, or
    // created again (released as Lost: no grant until the old holder must have stepped down).
    const lease = this.cluster.lease(LEASE);
    const record = lease !== undefined ? parseLease(lease) : undefined;
    const leaseLost = record === undefined || (record.holder === undefined && record.released === 'Lost');
    for (const { a, t } of believers) {
      if (record === undefined || leaseLost) continue;
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

  /** #checkMarks: every token on a pod names a grant the Lease committed to that pod (marks follow commits). */
  #checkMarks(): void {
    const keys = podKeys(LOCK);
    for (const pod of this.cluster.pods()) {
      const t = pod.metadata?.annotations?.[keys.token];
      if (t === undefined) continue;
      const ref = { name: pod.metadata?.name ?? '', uid: pod.metadata?.uid ?? '' };
      if (!this.grants.some((g) => g.token.toString() === t && sameHolder(g.holder, ref)))
        throw new Violation(
          'marks-follow-commits',
          `pod ${ref.name} is marked with token ${t}, which the Lease never committed to it (grants: ${this.grants.map((g) => `${g.token}→${g.holder.name}`).join(', ') || 'none'})`,
        );
    }
  }
}
