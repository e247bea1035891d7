/**
 * Shard moves (controller replicas that share the locks): for the `shard-move` phase the bed's
 * single controller is stopped and THREE real `fencepost controller --shards 6` processes run
 * instead (short Lease timings), each reaching the API server through a TCP proxy of its own. An
 * event acts on the replica that holds the shard of the lock of the trial that opened it:
 * - `kill-owner`: SIGKILL it; it joins again (a new replica, as a Deployment's new pod) at the end
 *   of the fault: its shards move to the others once its Leases expire, and some move back;
 * - `pause-owner`: SIGSTOP it for longer than a shard Lease (the others take its shards and
 *   grant), then SIGCONT it while the trials hand over again: it resumes believing it holds its
 *   shards, with the caches and queue it had, until its elector finds out — the overlap the
 *   safety argument says is harmless;
 * - `partition-owner`: blackhole its API-server proxy as long, then heal it (its buffered
 *   requests arrive late);
 * - `leave-owner`: SIGTERM it (it drains, releases its shards, and the others take them at once),
 *   then it joins again at the end of the fault (shards move back, after the holders' reconciles
 *   in flight ended).
 *
 * One event serves every trial at its handoff at that moment (as controller-split.ts does). Each
 * grant is attributed to the replica that logged it and compared with the holder of the lock's
 * shard Lease at that moment (polled): `grantsByNonOwner` counts grants by a replica that no longer
 * held the shard. They are not violations: every grant is a compare-and-swap on the lock's Lease.
 */
import { join, resolve } from 'node:path';
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { lockShard } from '../../../src/controllers/sharding/assign.ts';
import { startTcpProxy } from '../../support/testbed/tcp-proxy.ts';
import { tailLog } from '../../support/testbed/processes.ts';
import type { LeaseVersion } from '../history.ts';
import type { SafetyBed } from '../testbed.ts';
import { ELECTION, Replica } from './controller-split.ts';
import { GrantLog } from './grant-log.ts';

const MAIN = resolve(import.meta.dirname, '../../../src/cli/main.ts');

/** SHARDS: six shards over three replicas: two each, and a dead one's two go one to each survivor. */
export const SHARDS = 6;
/** ID: the Lease name prefix of the phase's replicas (--leader-election-id). */
const ID = 'safety-shards';
const GATHER_MS = 400;
const RESUME_LEAD_MS = 300;

export const SHARD_MOVE_VARIANTS = ['kill-owner', 'pause-owner', 'partition-owner', 'leave-owner'] as const;
export type ShardMoveVariant = (typeof SHARD_MOVE_VARIANTS)[number];

/** ShardMoveTicket is a trial's place in one event (the same moments as a controller-split ticket). */
export interface ShardMoveTicket {
  readonly variant: ShardMoveVariant;
  readonly faultMs: number;
  readonly stopped: Promise<number>;
  readonly resuming: Promise<void>;
  readonly done: Promise<void>;
}

interface PendingEvent {
  readonly opener: () => number;
  readonly shard: number;
  readonly joined: number;
  readonly resolveTicket: ((t: ShardMoveTicket) => void)[];
}

/** ShardMove is the three-replica controller of one shard-move phase. */
export class ShardMove {
  readonly #bed: SafetyBed;
  readonly #replicas: Replica[];
  /** #owners: per shard, its Lease holder as polled on the reference clock, each change once. */
  readonly #owners = new Map<number, { at: number; holder: string }[]>();
  readonly #poll: NodeJS.Timeout;
  readonly #grantLog = new GrantLog();
  #chain: Promise<unknown> = Promise.resolve();
  #pending: PendingEvent | undefined;
  readonly events: { variant: ShardMoveVariant; faultMs: number; trials: number; owner: string; moved: boolean }[] = [];

  private constructor(bed: SafetyBed, replicas: Replica[]) {
    this.#bed = bed;
    this.#replicas = replicas;
    this.#poll = setInterval(() => {
      void this.#pollOwners();
    }, 200);
  }

  /** start stops the bed's controller and starts three sharded replicas; resolves once every shard is held. */
  static async start(bed: SafetyBed): Promise<ShardMove> {
    await bed.suspendController();
    const admin = new KubeConfig();
    admin.loadFromFile(bed.kubeconfigPath);
    const server = new URL(admin.getCurrentCluster()?.server ?? '');
    const replicas = await Promise.all(
      ['a', 'b', 'c'].map(async (name) => {
        const proxy = await startTcpProxy({ targetPort: Number(server.port) });
        const kubeconfig = join(bed.dir, `shards-${name}.kubeconfig`);
        writeFileSync(kubeconfig, admin.exportConfig().replace(server.origin, `https://127.0.0.1:${proxy.port}`), {
          mode: 0o600,
        });
        return new Replica(
          name,
          proxy,
          bed.dir,
          (identity) => [
            MAIN,
            'controller',
            '--kubeconfig',
            kubeconfig,
            '--redis-url',
            `redis://127.0.0.1:${bed.counterProxy.port}`,
            '--namespace',
            bed.t.namespace,
            '--shards',
            String(SHARDS),
            '--leader-election-namespace',
            bed.t.namespace,
            '--leader-election-id',
            ID,
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
          ],
          'safety-shards',
        );
      }),
    );
    for (const r of replicas) r.start();
    const mv = new ShardMove(bed, replicas);
    if (!(await mv.#ready(90_000))) process.stderr.write(`shard-move: not every shard held after 90 s\n${mv.logs()}\n`);
    return mv;
  }

  async stop(): Promise<void> {
    clearInterval(this.#poll);
    await this.#chain.catch(() => undefined);
    await Promise.allSettled(this.#replicas.map((r) => r.stop()));
    await this.#bed.resumeController();
  }

  /** replicaStarts: replica processes started in all (each exit is followed by a restart, a join). */
  get replicaStarts(): number {
    return this.#replicas.reduce((a, r) => a + r.generation, 0);
  }

  /** shardMoves: changes of a shard Lease's holder from one replica to another (releases not counted). */
  get shardMoves(): number {
    let n = 0;
    for (const timeline of this.#owners.values()) {
      const held = timeline.filter((x) => x.holder !== '');
      for (let i = 1; i < held.length; i++) if (held[i]?.holder !== held[i - 1]?.holder) n++;
    }
    return n;
  }

  logs(): string {
    return this.#replicas.map((r) => `--- ${r.log}\n${tailLog(r.log, 20)}`).join('\n');
  }

  async #pollOwners(): Promise<void> {
    try {
      const list = await this.#bed.t.leases.listNamespacedLease({ namespace: this.#bed.t.namespace });
      const at = performance.now();
      for (const l of list.items) {
        const m = new RegExp(`^${ID}-shard-(\\d+)$`).exec(l.metadata?.name ?? '');
        if (m === null) continue;
        const s = Number(m[1]);
        const holder = l.spec?.holderIdentity ?? '';
        const timeline = this.#owners.get(s) ?? [];
        if (timeline.at(-1)?.holder !== holder) timeline.push({ at, holder });
        this.#owners.set(s, timeline);
      }
    } catch {
      /* a blip or a blackholed moment: the next poll records it */
    }
  }

  /** #ownerOf: the replica whose current process holds shard `s` (last poll). */
  #ownerOf(s: number): Replica | undefined {
    const holder = this.#owners.get(s)?.at(-1)?.holder ?? '';
    return this.#replicas.find((r) => holder.startsWith(`${r.identity}_`));
  }

  /** #ready waits until every shard is held by a running replica's current process (true), or timeoutMs. */
  async #ready(timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      await this.#pollOwners();
      let all = true;
      for (let s = 0; s < SHARDS; s++) if (this.#ownerOf(s)?.proc?.isRunning() !== true) all = false;
      if (all && this.#replicas.every((r) => r.proc?.isRunning() === true)) return true;
      if (performance.now() > deadline) return false;
      await sleep(200);
    }
  }

  /** join puts a trial of lock `namespace/name` at its handoff into the next event (see controller-split.ts). */
  join(rnd: () => number, lockKey: string): Promise<ShardMoveTicket> {
    return new Promise((resolveTicket) => {
      if (this.#pending !== undefined) {
        this.#pending.resolveTicket.push(resolveTicket);
        return;
      }
      const pending: PendingEvent = {
        opener: rnd,
        shard: lockShard(lockKey, SHARDS),
        joined: performance.now(),
        resolveTicket: [resolveTicket],
      };
      this.#pending = pending;
      const run = this.#chain.then(() => this.#run(pending));
      this.#chain = run.catch(() => undefined);
    });
  }

  async #run(p: PendingEvent): Promise<void> {
    await sleep(Math.max(0, p.joined + GATHER_MS - performance.now()));
    await this.#ready(90_000);
    if (this.#pending === p) this.#pending = undefined;
    const variant =
      SHARD_MOVE_VARIANTS[Math.floor(p.opener() * SHARD_MOVE_VARIANTS.length) % SHARD_MOVE_VARIANTS.length] ??
      'kill-owner';
    // Longer than a shard Lease, so that the shard moves: U[1.25, 2.5] leases.
    const faultMs = Math.round((1.25 + 1.25 * p.opener()) * ELECTION.leaseMs);
    let onStopped: (at: number) => void = () => undefined;
    let onResuming: () => void = () => undefined;
    let onDone: () => void = () => undefined;
    const ticket: ShardMoveTicket = {
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
    const owner = this.#ownerOf(p.shard);
    const ownerIdentity = this.#owners.get(p.shard)?.at(-1)?.holder ?? '';
    try {
      if (owner === undefined) {
        onStopped(performance.now());
        return;
      }
      // kill and leave: the slot restarts (joins) only when `cut` is cleared, at the end of the fault.
      if (variant === 'pause-owner') owner.proc?.signal('SIGSTOP');
      else if (variant === 'partition-owner') {
        owner.cut = true;
        owner.proxy.blackhole();
      } else {
        owner.cut = true;
        owner.proc?.signal(variant === 'kill-owner' ? 'SIGKILL' : 'SIGTERM');
      }
      onStopped(performance.now());
      await sleep(Math.max(0, faultMs - RESUME_LEAD_MS));
      onResuming();
      await sleep(RESUME_LEAD_MS);
      if (variant === 'pause-owner') owner.proc?.signal('SIGCONT');
      else if (variant === 'partition-owner') owner.proxy.heal();
      owner.cut = false;
    } finally {
      onResuming();
      onDone();
      const now = this.#owners.get(p.shard)?.at(-1)?.holder ?? '';
      this.events.push({
        variant,
        faultMs,
        trials: p.resolveTicket.length,
        owner: ownerIdentity,
        moved: now !== ownerIdentity,
      });
    }
  }

  /** tally attributes each grant in a trial's Lease history to a replica and compares it with the owner of the lock's shard then. */
  tally(lockKey: string, leases: readonly LeaseVersion[]): Record<string, number> {
    this.#grantLog.read(this.#replicas.flatMap((r) => r.logs));
    const timeline = this.#owners.get(lockShard(lockKey, SHARDS)) ?? [];
    const t = this.#grantLog.tally(leases, (at) => [...timeline].reverse().find((x) => x.at <= at)?.holder ?? '');
    return { grants: t.grants, grantsByNonOwner: t.byOther, grantsUnattributed: t.unattributed };
  }
}

const active = new WeakMap<SafetyBed, ShardMove>();

/** activeShardMove is the running ShardMove of the bed (inside withShardMove), if any. */
export function activeShardMove(bed: SafetyBed): ShardMove | undefined {
  return active.get(bed);
}

/** withShardMove runs fn with the three sharded replicas in place of the bed's controller, and restores it after. */
export async function withShardMove<T>(bed: SafetyBed, fn: () => Promise<T>): Promise<T> {
  const mv = await ShardMove.start(bed);
  active.set(bed, mv);
  try {
    return await fn();
  } finally {
    active.delete(bed);
    await mv.stop();
    const e = mv.events;
    const by = (v: ShardMoveVariant): number => e.filter((x) => x.variant === v).length;
    process.stderr.write(
      `shard-move: ${e.length} events (${SHARD_MOVE_VARIANTS.map((v) => `${v} ${by(v)}`).join(', ')}), ` +
        `${e.reduce((a, x) => a + x.trials, 0)} trial slots, the opener's shard moved in ${e.filter((x) => x.moved).length}, ` +
        `shard moves ${mv.shardMoves}, replica processes started ${mv.replicaStarts}\n`,
    );
  }
}
