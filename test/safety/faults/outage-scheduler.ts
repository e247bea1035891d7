/**
 * OutageScheduler: one outage of a shared service serves every trial that is ready for it.
 *
 * Stopping kube-apiserver or etcd hits every trial at once, so the trials of the `apiserver` phase
 * take their outages together instead of one after another: a trial `admit`s itself before its
 * set-up, `join`s with its plan once it holds its lock and writes, and the outage starts as soon as
 * every admitted trial has joined (none is left in its set-up, which the outage would break), or
 * after `gatherMs` at most (a hang guard: a trial stuck in set-up then lives through the outage).
 * While an outage is gathered or running no new trial is admitted; they wait at the gate and form
 * the next one. The first trial to join decides the outage's plan (drawn from its own seed), so a
 * trial replayed alone gets exactly its own plan.
 *
 * Outages never overlap: `run` is called for one at a time.
 */

/** Admission is one trial's place in the scheduler, from its set-up to its outage. */
export interface Admission {
  joined: boolean;
  done: boolean;
}

/** OutageRun is what `run` reports: when the service went away and when it answered again (reference clock). */
export interface OutageRun {
  readonly startAt: number;
  readonly endAt: number;
}

/** SharedOutage is one outage as every trial in it sees it. */
export interface SharedOutage<P> extends OutageRun {
  readonly seq: number;
  readonly plan: P;
  /** trials: how many trials lived through it as joiners. */
  readonly trials: number;
}

interface Batch<P> {
  readonly plan: P;
  readonly waiters: ((o: SharedOutage<P> | Error) => void)[];
  readonly createdAt: number;
  readonly go: Promise<void>;
  start: () => void;
}

/** OutageScheduler gathers trials into shared outages. */
export class OutageScheduler<P> {
  readonly #run: (plan: P) => Promise<OutageRun>;
  readonly #gatherMs: number;
  #preFault = 0;
  /** #batch: the outage being gathered (joinable); #running: the one under way. */
  #batch: Batch<P> | undefined;
  #running: Batch<P> | undefined;
  #busy: Promise<void> = Promise.resolve();
  #gateWaiters: (() => void)[] = [];
  #closed = false;
  #seq = 0;
  /** outages: how many outages ran. */
  outages = 0;

  constructor(run: (plan: P) => Promise<OutageRun>, gatherMs = 30_000) {
    this.#run = run;
    this.#gatherMs = gatherMs;
  }

  /** admit waits until no outage is gathered or running, then counts the trial as in set-up. */
  async admit(): Promise<Admission> {
    while ((this.#batch !== undefined || this.#running !== undefined) && !this.#closed)
      await new Promise<void>((r) => {
        this.#gateWaiters.push(r);
      });
    this.#preFault++;
    return { joined: false, done: false };
  }

  /** leave takes a trial out that will not join (its set-up failed, or it is done). Idempotent. */
  leave(a: Admission): void {
    if (a.done) return;
    a.done = true;
    if (!a.joined) {
      this.#preFault--;
      this.#maybeStart();
    }
  }

  /** join: the trial holds its lock and writes; resolves when the outage it lived through is over. */
  join(a: Admission, plan: P): Promise<SharedOutage<P>> {
    if (a.joined || a.done) return Promise.reject(new Error('join: trial already joined or left'));
    a.joined = true;
    this.#preFault--;
    let batch = this.#batch;
    if (batch === undefined) {
      let start = (): void => undefined;
      const go = new Promise<void>((r) => {
        start = r;
      });
      const b: Batch<P> = { plan, waiters: [], createdAt: performance.now(), go, start };
      batch = b;
      this.#batch = b;
      const timer = setTimeout(() => {
        b.start();
      }, this.#gatherMs);
      void this.#execute(b).finally(() => {
        clearTimeout(timer);
      });
    }
    const b = batch;
    const out = new Promise<SharedOutage<P>>((resolve, reject) => {
      b.waiters.push((o) => {
        if (o instanceof Error) reject(o);
        else resolve(o);
      });
    });
    this.#maybeStart();
    return out;
  }

  #maybeStart(): void {
    if (this.#batch !== undefined && this.#preFault <= 0) this.#batch.start();
  }

  async #execute(b: Batch<P>): Promise<void> {
    await b.go;
    const previous = this.#busy;
    let release = (): void => undefined;
    this.#busy = new Promise<void>((r) => {
      release = r;
    });
    await previous;
    // From here on a late joiner (one that was still in set-up after gatherMs) forms the next outage.
    if (this.#batch === b) this.#batch = undefined;
    this.#running = b;
    let result: SharedOutage<P> | Error;
    try {
      const run = await this.#run(b.plan);
      result = { ...run, seq: ++this.#seq, plan: b.plan, trials: b.waiters.length };
      this.outages++;
    } catch (err) {
      result = err instanceof Error ? err : new Error(String(err));
    }
    this.#running = undefined;
    for (const w of b.waiters) w(result);
    // Open the gate only after the outage (and only if no next one is gathered): trials admitted
    // now set up on a working control plane.
    if (this.#batch === undefined) {
      const gate = this.#gateWaiters;
      this.#gateWaiters = [];
      for (const g of gate) g();
    }
    release();
  }

  /** close lets every trial waiting at the gate through (the run is over). */
  close(): void {
    this.#closed = true;
    for (const g of this.#gateWaiters) g();
    this.#gateWaiters = [];
  }
}
