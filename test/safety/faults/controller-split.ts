/**
 * Controller HA split (two controllers that may both believe they lead): for the `controller-split`
 * phase the bed's single controller is stopped and TWO real controller processes run instead
 * (`fencepost controller --leader-elect true`, short election timings), each reaching the API
 * server through a TCP proxy of its own. A split event acts on the replica that leads at that
 * moment:
 * - `pause-leader`: SIGSTOP it for longer than the election lease (the standby takes over and
 *   grants), then SIGCONT it while the trials hand over again: it resumes believing it leads, with
 *   the caches and work queue it had before the pause;
 * - `partition-leader`: blackhole its API-server proxy (both directions, all its connections) for
 *   longer than the election lease; on heal, its buffered requests reach the API server late.
 * A replica that exits (the controller exits when it loses the lead) is started again as a
 * candidate, as Kubernetes would restart its container.
 *
 * One event serves every trial that is at its handoff at that moment: trials join the event being
 * gathered, it starts GATHER_MS after the first one joined (events never overlap), and each trial
 * hands over at the event's two moments (`stopped`, `resuming`). The event's own choices (variant,
 * duration) come from the seed of the trial that opened it.
 *
 * Which replica granted: each replica logs `Granted Lease` with the pod and token (its own log file
 * names the replica), and the election Lease is polled on the reference clock; `tally` counts, per
 * trial, grants made by a replica that was not the elected leader when the grant reached the Lease
 * watch. Those are not violations: the Lease compare-and-swap and the tokens make them harmless.
 * (The lock Lease's managedFields name the same manager for both replicas, and the LeaseGranted
 * Event's reportingInstance is emitted asynchronously and may be lost when the replica exits.)
 */
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { spawnManaged, tailLog, type ManagedProcess } from '../../support/testbed/processes.ts';
import { startTcpProxy, type TcpProxy } from '../../support/testbed/tcp-proxy.ts';
import type { LeaseVersion } from '../history.ts';
import { GrantLog, readLog } from './grant-log.ts';
import type { SafetyBed } from '../testbed.ts';

const MAIN = resolve(import.meta.dirname, '../../../src/cli/main.ts');

/**
 * The replicas' leader election: lease 4 s, renew deadline 3 s, retry 600 ms. Shorter settings
 * (2 s / 1.3 s / 400 ms) made the leader lose its lead every few seconds on the shared 2-core
 * machine at load 20–35 (renewals slower than the deadline), and every loss costs a process restart.
 */
export const ELECTION = {
  leaseMs: 4000,
  renewDeadlineMs: 3000,
  retryPeriodMs: 600,
  id: 'safety-split-leader',
} as const;
/** GATHER_MS: how long an event waits, after its first trial joined, for more trials to join. */
const GATHER_MS = 400;
/** RESUME_LEAD_MS: the trials' second handoff is released this long before the paused leader resumes. */
const RESUME_LEAD_MS = 300;

export const SPLIT_VARIANTS = ['pause-leader', 'partition-leader'] as const;
export type SplitVariant = (typeof SPLIT_VARIANTS)[number];

/** SplitTicket is a trial's place in one split event. */
export interface SplitTicket {
  readonly variant: SplitVariant;
  /** faultMs: how long the leader is paused or cut off. */
  readonly faultMs: number;
  /** stopped resolves (with the reference time) once the leader is paused or cut off. */
  readonly stopped: Promise<number>;
  /** resuming resolves shortly before the leader is resumed or healed. */
  readonly resuming: Promise<void>;
  /** done resolves after the leader was resumed or healed. */
  readonly done: Promise<void>;
}

/**
 * Replica is one controller replica slot (a, b; shard-move.ts runs three), restarted as a candidate
 * when its process exits (after `cut` is cleared).
 */
export class Replica {
  readonly name: string;
  readonly #prefix: string;
  readonly proxy: TcpProxy;
  readonly #args: (identity: string) => string[];
  readonly #dir: string;
  generation = 0;
  proc: ManagedProcess | undefined;
  /** cut: the proxy is blackholed; a restart waits for the heal (it could not reach the API server). */
  cut = false;
  stopping = false;
  readonly logs: string[] = [];
  constructor(
    name: string,
    proxy: TcpProxy,
    dir: string,
    args: (identity: string) => string[],
    prefix = 'safety-split',
  ) {
    this.name = name;
    this.#prefix = prefix;
    this.proxy = proxy;
    this.#dir = dir;
    this.#args = args;
  }

  /** identity is the --identity of the current process (the elector appends `_<uuid>`). */
  get identity(): string {
    return `${this.#prefix}-${this.name}-${this.generation}`;
  }
  get log(): string {
    return this.logs.at(-1) ?? '';
  }

  start(): void {
    this.generation++;
    const logFile = join(this.#dir, `${this.identity}.log`);
    this.logs.push(logFile);
    const proc = spawnManaged(this.identity, process.execPath, { args: this.#args(this.identity), logFile });
    this.proc = proc;
    void proc.exited.then(async () => {
      // Lost the lead (exit 1) or failed to start: come back as a candidate, once reachable.
      for (let i = 0; i < 600 && this.cut && !this.stopping; i++) await sleep(50);
      if (!this.stopping && this.proc === proc) this.start();
    });
  }

  /** workersStarted: its current process logged that it leads and started its workers. */
  workersStarted(): boolean {
    const text = readLog(this.log);
    return text.includes('Started leading') && text.includes('Started workers');
  }

  /** campaigning: its current process runs and takes part in the election (a standby that can take over). */
  campaigning(): boolean {
    return this.proc?.isRunning() === true && readLog(this.log).includes('Started campaigning');
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.proc?.signal('SIGCONT');
    this.proxy.heal();
    await this.proc?.stop(3000);
    await this.proxy.close();
  }
}

interface PendingEvent {
  readonly opener: () => number;
  readonly joined: number;
  ticket: SplitTicket | undefined;
  resolveTicket: ((t: SplitTicket) => void)[];
}

/** ControllerSplit is the two-replica controller of one controller-split phase. */
export class ControllerSplit {
  readonly #bed: SafetyBed;
  readonly #replicas: Replica[];
  /** #leaders: the election Lease's holder as polled on the reference clock, each change once. */
  readonly #leaders: { at: number; holder: string }[] = [];
  readonly #poll: NodeJS.Timeout;
  readonly #grantLog = new GrantLog();
  #chain: Promise<unknown> = Promise.resolve();
  #pending: PendingEvent | undefined;
  /** events: what each split event did (for the phase's report). */
  readonly events: {
    variant: SplitVariant;
    faultMs: number;
    trials: number;
    leader: string;
    tookOver: string | undefined;
  }[] = [];

  private constructor(bed: SafetyBed, replicas: Replica[]) {
    this.#bed = bed;
    this.#replicas = replicas;
    this.#poll = setInterval(() => {
      void this.#pollLeader();
    }, 100);
  }

  /** start stops the bed's controller and starts two replicas; resolves once one of them leads with workers running. */
  static async start(bed: SafetyBed): Promise<ControllerSplit> {
    await bed.suspendController();
    const admin = new KubeConfig();
    admin.loadFromFile(bed.kubeconfigPath);
    const server = new URL(admin.getCurrentCluster()?.server ?? '');
    const replicas = await Promise.all(
      ['a', 'b'].map(async (name) => {
        const proxy = await startTcpProxy({ targetPort: Number(server.port) });
        const kubeconfig = join(bed.dir, `split-${name}.kubeconfig`);
        writeFileSync(kubeconfig, admin.exportConfig().replace(server.origin, `https://127.0.0.1:${proxy.port}`), {
          mode: 0o600,
        });
        return new Replica(name, proxy, bed.dir, (identity) => [
          MAIN,
          'controller',
          '--kubeconfig',
          kubeconfig,
          '--redis-url',
          `redis://127.0.0.1:${bed.counterProxy.port}`,
          '--namespace',
          bed.t.namespace,
          '--leader-elect',
          'true',
          '--leader-election-namespace',
          bed.t.namespace,
          '--leader-election-id',
          ELECTION.id,
          '--leader-election-lease-duration',
          `${ELECTION.leaseMs}ms`,
          '--leader-election-renew-deadline',
          `${ELECTION.renewDeadlineMs}ms`,
          '--leader-election-retry-period',
          `${ELECTION.retryPeriodMs}ms`,
          '--metrics-bind-address',
          '127.0.0.1:0',
          '--health-probe-bind-address',
          '127.0.0.1:0',
          '--identity',
          identity,
          '--log-level',
          'info',
        ]);
      }),
    );
    for (const r of replicas) r.start();
    const split = new ControllerSplit(bed, replicas);
    await split.#ready(60_000);
    return split;
  }

  async stop(): Promise<void> {
    clearInterval(this.#poll);
    await this.#chain.catch(() => undefined);
    await Promise.allSettled(this.#replicas.map((r) => r.stop()));
    await this.#bed.resumeController();
  }

  /** replicaStarts: controller replica processes started in all (each exit is followed by a restart). */
  get replicaStarts(): number {
    return this.#replicas.reduce((a, r) => a + r.generation, 0);
  }

  /** logs: the tails of the current replica logs (failure messages). */
  logs(): string {
    return this.#replicas.map((r) => `--- ${r.log}\n${tailLog(r.log, 20)}`).join('\n');
  }

  async #pollLeader(): Promise<void> {
    try {
      const lease = await this.#bed.t.leases.readNamespacedLease({
        namespace: this.#bed.t.namespace,
        name: ELECTION.id,
      });
      const holder = lease.spec?.holderIdentity ?? '';
      if (this.#leaders.at(-1)?.holder !== holder) this.#leaders.push({ at: performance.now(), holder });
    } catch {
      /* not created yet, or a blip: the next poll records it */
    }
  }

  /** #leaderReplica: the replica whose current process holds the election Lease (last poll). */
  #leaderReplica(): Replica | undefined {
    const holder = this.#leaders.at(-1)?.holder ?? '';
    return this.#replicas.find((r) => holder.startsWith(`${r.identity}_`));
  }

  /** #ready waits until one replica leads with its workers started and the other runs (or timeoutMs). */
  async #ready(timeoutMs: number): Promise<Replica | undefined> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      await this.#pollLeader();
      const leader = this.#leaderReplica();
      if (leader !== undefined && leader.workersStarted() && this.#replicas.every((r) => r.campaigning()))
        return leader;
      if (performance.now() > deadline) return leader;
      await sleep(100);
    }
  }

  /**
   * join puts a trial at its handoff into the next split event (opening one with the trial's
   * random source if none is gathering) and resolves with its ticket when the event starts.
   */
  join(rnd: () => number): Promise<SplitTicket> {
    return new Promise((resolveTicket) => {
      if (this.#pending !== undefined) {
        this.#pending.resolveTicket.push(resolveTicket);
        return;
      }
      const pending: PendingEvent = {
        opener: rnd,
        joined: performance.now(),
        ticket: undefined,
        resolveTicket: [resolveTicket],
      };
      this.#pending = pending;
      const run = this.#chain.then(() => this.#run(pending));
      this.#chain = run.catch(() => undefined);
    });
  }

  async #run(p: PendingEvent): Promise<void> {
    await sleep(Math.max(0, p.joined + GATHER_MS - performance.now()));
    const leader = await this.#ready(90_000);
    if (this.#pending === p) this.#pending = undefined; // later trials gather for the next event
    const variant =
      SPLIT_VARIANTS[Math.floor(p.opener() * SPLIT_VARIANTS.length) % SPLIT_VARIANTS.length] ?? 'pause-leader';
    // Longer than the election lease, so the standby takes over and grants: U[1.25, 2.5] leases.
    const faultMs = Math.round((1.25 + 1.25 * p.opener()) * ELECTION.leaseMs);
    let onStopped: (at: number) => void = () => undefined;
    let onResuming: () => void = () => undefined;
    let onDone: () => void = () => undefined;
    const ticket: SplitTicket = {
      variant,
      faultMs,
      stopped: new Promise((r) => {
        onStopped = r;
      }),
      resuming: new Promise((r) => {
        onResuming = r;
      }),
      done: new Promise((r) => {
        onDone = r;
      }),
    };
    for (const r of p.resolveTicket) r(ticket);
    const leaderIdentity = this.#leaders.at(-1)?.holder ?? '';
    try {
      if (leader === undefined) {
        onStopped(performance.now());
        return;
      } // no leader: the trials hand over anyway
      if (variant === 'pause-leader') leader.proc?.signal('SIGSTOP');
      else {
        leader.cut = true;
        leader.proxy.blackhole();
      }
      const startAt = performance.now();
      onStopped(startAt);
      await sleep(Math.max(0, faultMs - RESUME_LEAD_MS));
      onResuming();
      await sleep(RESUME_LEAD_MS);
      if (variant === 'pause-leader') leader.proc?.signal('SIGCONT');
      else {
        leader.proxy.heal();
        leader.cut = false;
      }
    } finally {
      onResuming();
      onDone();
      const now = this.#leaders.at(-1)?.holder;
      this.events.push({
        variant,
        faultMs,
        trials: p.resolveTicket.length,
        leader: leaderIdentity,
        tookOver: now !== leaderIdentity ? now : undefined,
      });
    }
  }

  /** tally attributes each grant in a trial's Lease history to a replica and compares it with the elected leader then. */
  tally(leases: readonly LeaseVersion[]): Record<string, number> {
    this.#grantLog.read(this.#replicas.flatMap((r) => r.logs));
    const t = this.#grantLog.tally(leases, (at) => [...this.#leaders].reverse().find((l) => l.at <= at)?.holder ?? '');
    return { grants: t.grants, grantsByNonLeader: t.byOther, grantsUnattributed: t.unattributed };
  }
}

const active = new WeakMap<SafetyBed, ControllerSplit>();

/** activeSplit is the running ControllerSplit of the bed (inside withControllerSplit), if any. */
export function activeSplit(bed: SafetyBed): ControllerSplit | undefined {
  return active.get(bed);
}

/** withControllerSplit runs fn with the two replicas in place of the bed's controller, and restores it after. */
export async function withControllerSplit<T>(bed: SafetyBed, fn: () => Promise<T>): Promise<T> {
  const split = await ControllerSplit.start(bed);
  active.set(bed, split);
  try {
    return await fn();
  } finally {
    active.delete(bed);
    await split.stop();
    const e = split.events;
    const by = (v: SplitVariant): number => e.filter((x) => x.variant === v).length;
    process.stderr.write(
      `controller-split: ${e.length} events (${SPLIT_VARIANTS.map((v) => `${v} ${by(v)}`).join(', ')}), ` +
        `${e.reduce((a, x) => a + x.trials, 0)} trial slots (mean ${(e.reduce((a, x) => a + x.trials, 0) / Math.max(1, e.length)).toFixed(1)} per event), ` +
        `leader changed in ${e.filter((x) => x.tookOver !== undefined).length}, replica processes started ${split.replicaStarts}\n`,
    );
  }
}
