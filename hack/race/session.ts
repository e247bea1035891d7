/**
 * The race's I/O shell: it owns the two worker processes of a round, freezes the holder (a real
 * SIGSTOP of its worker and its agent, then SIGCONT), and publishes what happens as
 * {@link RaceEvent}s. What the events say is decided in narrate.ts; this file only moves bytes and
 * signals.
 *
 * The freeze stops the agent as well as the worker: the agent renews the lease for the pod, so a
 * worker frozen alone would keep the lock and nothing would happen — the pause of the story is
 * the whole pod's (a long GC pause, a VM stall). The worker is stopped right after it asked its
 * agent ("held, token N") and before it writes, so it wakes up with a write to finish under a token
 * that is stale by then.
 *
 * One action runs at a time; another asked for meanwhile is refused with {@link BusyError}.
 */
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CheckedEvent } from '../demo/events.ts';
import type { DemoPod, DemoTestbed, LeaseListener } from '../demo/story.ts';
import { startWorker, type WorkerProcess } from '../demo/worker-process.ts';
import type { RaceEvent } from './events.ts';
import { MAX_PAUSE_SECONDS } from './limits.ts';
import { leaseEvents, NOTHING_SEEN, WriteNarrator, type LeaseSeen } from './narrate.ts';

/** BusyError: another action is running, or the state does not allow this one (HTTP 409). */
export class BusyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BusyError';
  }
}

/** RaceSessionOptions configures a {@link RaceSession}. */
export interface RaceSessionOptions {
  readonly testbed: DemoTestbed;
  readonly lock: string;
  readonly key: string;
  /** onLease subscribes to the lock's Lease polls (Demo.onLease). */
  readonly onLease: (listener: LeaseListener) => () => void;
  /** publish receives every event, in order. */
  readonly publish: (e: RaceEvent) => void;
}

interface Frozen {
  readonly pod: DemoPod;
  readonly worker: WorkerProcess;
  readonly since: number;
  readonly timer: NodeJS.Timeout;
}

const isChecked = (e: { type: string }): e is CheckedEvent => e.type === 'checked';

/** RaceSession: see the module comment. */
export class RaceSession {
  readonly #o: RaceSessionOptions;
  #guard = true;
  #workers = new Map<string, WorkerProcess>();
  #round = 0;
  #busy = false;
  #frozen: Frozen | undefined;
  #holder: string | undefined;
  #seen: LeaseSeen = NOTHING_SEEN;
  #unsubscribe: (() => void) | undefined;

  constructor(o: RaceSessionOptions) {
    this.#o = o;
  }

  /** guard: whether the next round writes through the Redis guard. */
  get guard(): boolean {
    return this.#guard;
  }

  /** start follows the Lease (grants, renewals, expiries) until stop(). */
  start(): void {
    this.#o.publish({ type: 'guard', at: Date.now(), on: this.#guard });
    this.#unsubscribe = this.#o.onLease((rec) => {
      const poll = {
        pod: rec?.holder?.name,
        token: rec?.token?.toString(),
        renewTime: rec?.renewTime?.getTime(),
        leaseSeconds: rec?.leaseDurationSeconds,
      };
      const { seen, events } = leaseEvents(this.#seen, poll, Date.now());
      this.#seen = seen;
      this.#holder = seen.pod;
      for (const e of events) this.#o.publish(e);
    });
  }

  /** race (re)starts both workers: they ask their agents every 200 ms and write while theirs says held. */
  async race(): Promise<void> {
    await this.#exclusive(async () => {
      if (this.#frozen !== undefined) throw new BusyError('A worker is frozen: wake it first.');
      await this.#restart();
    });
  }

  /** setGuard changes the guard setting; a running round is restarted with it. */
  async setGuard(on: boolean): Promise<void> {
    await this.#exclusive(async () => {
      if (this.#frozen !== undefined) throw new BusyError('A worker is frozen: wake it first.');
      if (on === this.#guard) return;
      this.#guard = on;
      this.#o.publish({ type: 'guard', at: Date.now(), on });
      if (this.#workers.size > 0) await this.#restart();
    });
  }

  /**
   * freeze stops the holder's worker and agent right after the worker's next check, for `seconds`;
   * resolves once they are stopped, with the pod and the token the worker believes in.
   */
  async freeze(seconds: number): Promise<{ pod: string; token: string }> {
    if (!(seconds > 0 && seconds <= MAX_PAUSE_SECONDS))
      throw new RangeError(`The pause must be between 0 and ${MAX_PAUSE_SECONDS} seconds.`);
    return await this.#exclusive(async () => {
      if (this.#frozen !== undefined) throw new BusyError('A worker is frozen already.');
      const name = this.#holder;
      const worker = name !== undefined ? this.#workers.get(name) : undefined;
      if (name === undefined || worker === undefined)
        throw new BusyError('Nobody is writing under the lock yet: start the race first.');
      const pod = this.#pod(name);
      // Stop between the check and the write (the worker waits 150 ms there). If the write line
      // arrived anyway, the signal came too late: resume and wait for the next check.
      for (let attempt = 1; ; attempt++) {
        const c = await worker.next(isChecked, 5000, `${name} to check its agent`);
        worker.signal('SIGSTOP');
        pod.agent.signal('SIGSTOP');
        await sleep(80);
        if (!worker.events.some((e) => e.type === 'write' && e.seq === c.seq)) {
          const since = performance.now();
          const timer = setTimeout(() => {
            this.thaw();
          }, seconds * 1000);
          this.#frozen = { pod, worker, since, timer };
          this.#o.publish({ type: 'frozen', at: Date.now(), pod: name, token: c.token, seconds });
          return { pod: name, token: c.token };
        }
        pod.agent.signal('SIGCONT');
        worker.signal('SIGCONT');
        if (attempt >= 5) throw new Error(`Could not freeze ${name} between its check and its write.`);
      }
    });
  }

  /** thaw resumes a frozen pod now (the freeze's timer calls it too); nothing when none is frozen. */
  thaw(): void {
    const f = this.#frozen;
    if (f === undefined) return;
    this.#frozen = undefined;
    clearTimeout(f.timer);
    // The agent first, so that it can answer "lost" by the time the worker asks again.
    f.pod.agent.signal('SIGCONT');
    f.worker.signal('SIGCONT');
    const afterSeconds = Number(((performance.now() - f.since) / 1000).toFixed(1));
    this.#o.publish({ type: 'thawed', at: Date.now(), pod: f.pod.name, afterSeconds });
  }

  /** stop resumes anything frozen and stops the workers. */
  async stop(): Promise<void> {
    this.#unsubscribe?.();
    this.thaw();
    await this.#stopWorkers();
  }

  async #exclusive<T>(action: () => Promise<T>): Promise<T> {
    if (this.#busy) throw new BusyError('Another action is still running.');
    this.#busy = true;
    try {
      return await action();
    } finally {
      this.#busy = false;
    }
  }

  async #stopWorkers(): Promise<void> {
    const old = [...this.#workers.values()];
    this.#workers = new Map();
    await Promise.all(old.map((w) => w.stop()));
  }

  async #restart(): Promise<void> {
    await this.#stopWorkers();
    const round = ++this.#round;
    const ledger = await this.#o.testbed.ledger.get(this.#o.key);
    const narrator = new WriteNarrator(ledger);
    this.#o.publish({ type: 'round', at: Date.now(), guard: this.#guard });
    this.#o.publish({ type: 'ledger', at: Date.now(), value: ledger });
    for (const pod of this.#o.testbed.pods) {
      const w = startWorker({
        pod: pod.name,
        agentPort: pod.port,
        redisUrl: this.#o.testbed.redisUrl,
        lock: this.#o.lock,
        key: this.#o.key,
        fenced: this.#guard,
        logFile: join(this.#o.testbed.logDir, `race-${round}-${pod.name}.log`),
      });
      w.onEvent((e) => {
        for (const r of narrator.next(e, Date.now())) this.#o.publish(r);
      });
      this.#workers.set(pod.name, w);
    }
  }

  #pod(name: string): DemoPod {
    const pod = this.#o.testbed.pods.find((p) => p.name === name);
    if (pod === undefined) throw new Error(`No pod ${name} on the testbed`);
    return pod;
  }
}
