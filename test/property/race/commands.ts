/**
 * The commands of the model-based race test (docs/safety.md), for fc.commands: each changes the
 * world of ./world.ts and then checks the invariants. A failing sequence shrinks, and fast-check
 * prints it with its `seed` and `path` (and a `replayPath` for fc.commands) to replay it.
 */
import fc from 'fast-check';
import type { Operation } from '../../support/memory-cluster.ts';
import { AGENTS, STEP_MS, type World } from './world.ts';

/** Model: the commands check the real world's invariants, so the model holds nothing. */
type Model = object;
type Command = fc.AsyncCommand<Model, World>;

const done = async (w: World): Promise<void> => {
  await w.settle();
  w.check();
};

/** Acquire: the agent's pod becomes a Ready candidate (Election mode: it may be granted). */
class Acquire implements Command {
  readonly i: number;
  constructor(i: number) {
    this.i = i;
  }
  check(): boolean {
    return true;
  }
  async run(_m: Model, w: World): Promise<void> {
    const a = w.agents[this.i];
    if (a !== undefined) a.candidate = true;
    await done(w);
  }
  toString(): string {
    return `acquire(${this.i})`;
  }
}

/** Release: the holder gives the lock up (the session's CAS) and stops being a candidate. */
class Release implements Command {
  readonly i: number;
  constructor(i: number) {
    this.i = i;
  }
  check(): boolean {
    return true;
  }
  async run(_m: Model, w: World): Promise<void> {
    const a = w.agents[this.i];
    if (a === undefined || a.paused) return;
    a.candidate = false;
    const releasing = a.session.release().catch(() => undefined);
    await w.settle();
    if (!a.paused) await releasing;
    w.check();
  }
  toString(): string {
    return `release(${this.i})`;
  }
}

/** Check: the application reads its token (heldToken) and will write with it later. */
class Check implements Command {
  readonly i: number;
  constructor(i: number) {
    this.i = i;
  }
  check(): boolean {
    return true;
  }
  async run(_m: Model, w: World): Promise<void> {
    const a = w.agents[this.i];
    if (a !== undefined && !a.paused) a.pending = a.session.heldToken();
    await done(w);
  }
  toString(): string {
    return `check(${this.i})`;
  }
}

/** Write: the application writes with the token it checked (maybe long ago), or checks and writes now. */
class Write implements Command {
  readonly i: number;
  constructor(i: number) {
    this.i = i;
  }
  check(): boolean {
    return true;
  }
  async run(_m: Model, w: World): Promise<void> {
    const a = w.agents[this.i];
    if (a === undefined || a.paused) return;
    const token = a.pending ?? a.session.heldToken();
    a.pending = undefined;
    if (token !== undefined) w.write(this.i, token);
    await done(w);
  }
  toString(): string {
    return `write(${this.i})`;
  }
}

/**
 * Stall: a holder paused past its lease, in one command: the application checks its token, the
 * process is paused for `ms` (the others go on: renews, expiry, a successor's grant and writes),
 * resumes and sends the write it had checked.
 */
class Stall implements Command {
  readonly i: number;
  readonly ms: number;
  constructor(i: number, ms: number) {
    this.i = i;
    this.ms = ms;
  }
  check(): boolean {
    return true;
  }
  async run(_m: Model, w: World): Promise<void> {
    const a = w.agents[this.i];
    if (a === undefined || a.paused) return;
    a.pending = a.session.heldToken();
    a.pause();
    await w.tick(this.ms);
    await a.resume();
    const token = a.pending;
    a.pending = undefined;
    if (token !== undefined) w.write(this.i, token);
    await done(w);
  }
  toString(): string {
    return `stall(${this.i}, ${this.ms})`;
  }
}

/**
 * AgentStep: a fault on one agent's process, through the Agent method of the same name —
 * pause: SIGSTOP (its clock, timers, responses and watch events wait); resume: SIGCONT (late timers
 * fire, then held responses and events arrive); partition: cut off from the API server (requests
 * fail, the watch misses events); heal: the cut ends, the watch relists.
 */
class AgentStep implements Command {
  readonly step: 'pause' | 'resume' | 'partition' | 'heal';
  readonly i: number;
  constructor(step: AgentStep['step'], i: number) {
    this.step = step;
    this.i = i;
  }
  check(): boolean {
    return true;
  }
  async run(_m: Model, w: World): Promise<void> {
    await w.agents[this.i]?.[this.step]();
    await done(w);
  }
  toString(): string {
    return `${this.step}(${this.i})`;
  }
}

/** Tick: time passes (renews, deadlines, expiry), with the controller reconciling when due. */
class Tick implements Command {
  readonly ms: number;
  constructor(ms: number) {
    this.ms = ms;
  }
  check(): boolean {
    return true;
  }
  async run(_m: Model, w: World): Promise<void> {
    await w.tick(this.ms);
  }
  toString(): string {
    return `tick(${this.ms})`;
  }
}

/** Reconcile: the controller reconciles now (an event woke it up). */
class Reconcile implements Command {
  check(): boolean {
    return true;
  }
  async run(_m: Model, w: World): Promise<void> {
    await w.alongside(w.controller.reconcile());
    w.check();
  }
  toString(): string {
    return 'reconcile';
  }
}

/**
 * CrashController: SIGKILL, right away or in the middle of a reconcile, right before one of its
 * writes takes effect: before the Lease CAS (a token taken and never recorded: a gap, never a
 * reuse), before the holder pod is marked (the Lease granted, the pod not yet), or before the
 * status write. The replacement process starts at once and has observed nothing (it waits a full
 * lease again).
 */
class CrashController implements Command {
  readonly before: Operation | undefined;
  constructor(before: Operation | undefined) {
    this.before = before;
  }
  check(): boolean {
    return true;
  }
  async run(_m: Model, w: World): Promise<void> {
    if (this.before !== undefined) {
      await w.alongside(w.controller.reconcile(this.before));
    }
    w.controller.crash();
    w.controller.restart();
    await done(w);
  }
  toString(): string {
    return this.before !== undefined ? `crashController(before ${this.before})` : 'crashController';
  }
}

/**
 * DeleteLease: someone deletes the lock's Lease (a script, an admin, a co-tenant with `leases
 * delete`); agents see it on their watch (a partitioned one only after the heal), and the
 * controller creates it again on its next reconcile.
 */
class DeleteLease implements Command {
  check(): boolean {
    return true;
  }
  async run(_m: Model, w: World): Promise<void> {
    w.deleteLease();
    await done(w);
  }
  toString(): string {
    return 'deleteLease';
  }
}

/** RestartRedis: Redis restarts empty; the counter starts again from nothing. */
class RestartRedis implements Command {
  check(): boolean {
    return true;
  }
  async run(_m: Model, w: World): Promise<void> {
    w.counter.reset();
    w.log.push('redis restarted empty');
    await done(w);
  }
  toString(): string {
    return 'restartRedis';
  }
}

const agent = fc.integer({ min: 0, max: AGENTS - 1 });

/** weighted repeats an arbitrary: fc.commands picks uniformly among its list. */
const weighted = <T>(n: number, arb: fc.Arbitrary<T>): fc.Arbitrary<T>[] => Array.from({ length: n }, () => arb);

/** commandArbs: every command, weighted so that time passes, agents contend and write often. */
export const commandArbs: fc.Arbitrary<Command>[] = [
  ...weighted(
    2,
    agent.map((i) => new Acquire(i)),
  ),
  agent.map((i) => new Release(i)),
  ...weighted(
    2,
    agent.map((i) => new Check(i)),
  ),
  ...weighted(
    3,
    agent.map((i) => new Write(i)),
  ),
  ...weighted(
    2,
    fc.tuple(agent, fc.constantFrom(1000, 2500, 4000, 6000)).map(([i, ms]) => new Stall(i, ms)),
  ),
  ...(['pause', 'resume', 'partition', 'heal'] as const).map((step) => agent.map((i) => new AgentStep(step, i))),
  ...weighted(
    4,
    fc.constantFrom(STEP_MS, 400, 1000, 2500, 4000).map((ms) => new Tick(ms)),
  ),
  fc.constant(new Reconcile()),
  fc
    .constantFrom<Operation | undefined>(undefined, 'lease.replace', 'pod.patch', 'status.patch')
    .map((before) => new CrashController(before)),
  fc.constant(new RestartRedis()),
  fc.constant(new DeleteLease()),
];
