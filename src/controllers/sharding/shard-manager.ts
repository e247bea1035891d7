/**
 * ShardManager: controller replicas that share the locks. The locks fall into a fixed number of
 * shards (assign.ts); each replica
 *
 * 1. holds a *membership Lease* `<id>-member-<member>` (labelled {@link MEMBER_LABEL}: `<id>`)
 *    with a {@link LeaderElector} of its own, so that the others learn it is alive;
 * 2. lists the membership Leases every retry period and counts a member live while its record
 *    keeps changing, judged as the elector judges a leader: by when this replica first saw each
 *    record, on its own monotonic clock, never by the timestamps written in it;
 * 3. computes the same deterministic assignment of shards to live members as every other replica;
 * 4. campaigns for the *shard Lease* `<id>-shard-<n>` of every shard assigned to it (one
 *    LeaderElector per term), and acts for a shard — reconciles its locks — only while it holds
 *    that Lease;
 * 5. gives a shard up when it is no longer assigned: it stops taking the shard's keys at once,
 *    waits for its reconciles of that shard in flight to end, then releases the Lease, so that the
 *    new owner is granted it at its next attempt. A replica that dies leaves its Leases to expire.
 *
 * Why two replicas acting for one shard for a moment is still safe: a shard Lease is not a fence
 * (see the warning in runtime/leaderelection.ts) — a paused owner may still have a grant in flight
 * when the next owner starts. Every grant is a compare-and-swap on the lock's own Lease with the
 * resourceVersion it was decided from, and the token is raised only in that write, from the
 * high-water mark that Lease carries; so of two overlapping replicas at most one write succeeds
 * per version of the Lease, and the next version's token is above it. The shard Lease only keeps
 * that overlap rare and short: it is what makes the work shared, not what makes it safe.
 */
import type { V1Lease } from '@kubernetes/client-node';
import type { TimerClock } from '../../runtime/clock.ts';
import { sleep } from '../../runtime/clock.ts';
import type { ObjectKey } from '../../runtime/controller.ts';
import { isAlreadyExists } from '../../runtime/errors.ts';
import { LeaderElector, type LeaseClient } from '../../runtime/leaderelection.ts';
import type { LeaderElectionLogger } from '../../runtime/leaderelection-config.ts';
import { assignShards, lockShard, shardsOf } from './assign.ts';

/** MEMBER_LABEL labels every membership Lease; its value is the controller's Lease name (--leader-election-id). */
export const MEMBER_LABEL = 'fencepost.io/controller-members';

/** memberLeaseName is the membership Lease of `member` among the replicas of `id`. */
export function memberLeaseName(id: string, member: string): string {
  return `${id}-member-${member}`;
}

/** shardLeaseName is the Lease of shard `shard` among the replicas of `id`. */
export function shardLeaseName(id: string, shard: number): string {
  return `${id}-shard-${shard}`;
}

/** MemberLister lists the Leases a label selector matches in one namespace (the membership Leases). */
export interface MemberLister {
  list(namespace: string, labelSelector: string, signal: AbortSignal): Promise<readonly V1Lease[]>;
}

/**
 * ShardGate is what the lock controller asks of the sharding (controllers/distributedlock/setup.ts
 * applies it in a few lines): whether this replica acts for a lock now, a way to run a reconcile
 * counted as in flight for the lock's shard, and a call when a shard is gained.
 */
export interface ShardGate {
  /** owns: this replica holds the Lease of the lock's shard and is not giving it up. */
  owns(key: ObjectKey): boolean;
  /**
   * run runs `reconcile` if this replica owns the key's shard, counted as in flight for that shard
   * until it settles (a shard is released only after its reconciles in flight ended), and resolves
   * undefined without running it otherwise.
   */
  run<T>(key: ObjectKey, reconcile: () => Promise<T>): Promise<T | undefined>;
  /**
   * onGained registers `listener`, called (synchronously, so it must only enqueue) each time this
   * replica starts holding a shard, with a test for the keys of that shard. Returns an unregister.
   */
  onGained(listener: (inShard: (key: ObjectKey) => boolean) => void): () => void;
}

/** ShardManagerOptions configures a {@link ShardManager}. */
export interface ShardManagerOptions {
  readonly leases: LeaseClient;
  readonly members: MemberLister;
  /** namespace of the membership and shard Leases (--leader-election-namespace). */
  readonly namespace: string;
  /** id: the prefix of every Lease name (--leader-election-id). */
  readonly id: string;
  /** member: this replica's stable name (the pod name): its membership Lease, and its key in the assignment. */
  readonly member: string;
  /** identity: this process incarnation's holderIdentity on every Lease (unique per incarnation). */
  readonly identity: string;
  /** shards: how many shards the locks fall into (--shards); every replica must be given the same. */
  readonly shards: number;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly clock: TimerClock;
  readonly log: LeaderElectionLogger;
  /** onMembershipLost: the membership Lease was lost while running (not on stop); the caller exits. */
  readonly onMembershipLost: () => void;
  /** onShardsChanged: called with the shards held after every change (for a metric and the logs). */
  readonly onShardsChanged?: (owned: readonly number[]) => void;
}

interface Term {
  readonly abort: AbortController;
  leading: boolean;
  /** releasing: no longer assigned; the Lease is given up once `inFlight` of its shard is 0. */
  releasing: boolean;
  done: Promise<void>;
}

interface Seen {
  readonly fingerprint: string;
  readonly atMs: number;
  readonly durationMs: number;
}

/** ShardManager runs the membership and the shard Leases of one replica; see the module comment. */
export class ShardManager implements ShardGate {
  readonly #o: ShardManagerOptions;
  readonly #terms = new Map<number, Term>();
  readonly #inFlight = new Map<number, number>();
  readonly #listeners = new Set<(inShard: (key: ObjectKey) => boolean) => void>();
  /** #seen: per membership Lease name, its record last seen and when (our monotonic time) first seen. */
  readonly #seen = new Map<string, Seen>();
  #membership: LeaderElector | undefined;
  #member = false;
  #stopping = false;
  readonly #abort = new AbortController();

  constructor(o: ShardManagerOptions) {
    if (!Number.isInteger(o.shards) || o.shards < 1)
      throw new RangeError(`shards must be a positive integer, got ${o.shards}`);
    if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(o.member) || memberLeaseName(o.id, o.member).length > 253)
      throw new RangeError(
        `member must be a lower-case DNS name (it names the Lease ${memberLeaseName(o.id, o.member)}), got ${JSON.stringify(o.member)}`,
      );
    this.#o = o;
  }

  /** shardOf is the shard of a lock key. */
  shardOf(key: ObjectKey): number {
    return lockShard(key, this.#o.shards);
  }

  owns(key: ObjectKey): boolean {
    const t = this.#terms.get(this.shardOf(key));
    return t !== undefined && t.leading && !t.releasing;
  }

  async run<T>(key: ObjectKey, reconcile: () => Promise<T>): Promise<T | undefined> {
    if (!this.owns(key)) return undefined;
    const s = this.shardOf(key);
    this.#inFlight.set(s, (this.#inFlight.get(s) ?? 0) + 1);
    try {
      return await reconcile();
    } finally {
      const n = (this.#inFlight.get(s) ?? 1) - 1;
      if (n === 0) this.#inFlight.delete(s);
      else this.#inFlight.set(s, n);
      this.#releaseIfDrained(s);
    }
  }

  onGained(listener: (inShard: (key: ObjectKey) => boolean) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** owned is the shards this replica holds now (including one it is giving up), ascending. */
  owned(): number[] {
    return [...this.#terms.entries()]
      .filter(([, t]) => t.leading)
      .map(([s]) => s)
      .sort((a, b) => a - b);
  }

  /** healthy: the membership Lease is renewed (the elector's liveness check), or not yet held. */
  healthy(toleranceMs: number): boolean {
    return this.#membership?.healthy(toleranceMs) ?? true;
  }

  /**
   * start creates the membership Lease if it is missing (labelled, so the others can list it),
   * starts holding it, and starts the loop that follows the live members and the assignment.
   * Resolves once started; runs until {@link stop}.
   */
  async start(): Promise<void> {
    const o = this.#o;
    const name = memberLeaseName(o.id, o.member);
    try {
      await o.leases.create(o.namespace, {
        metadata: { name, namespace: o.namespace, labels: { [MEMBER_LABEL]: o.id } },
        spec: {},
      });
    } catch (err) {
      if (!isAlreadyExists(err))
        throw new Error(`Failed to create membership Lease ${o.namespace}/${name}`, { cause: err });
    }
    this.#membership = new LeaderElector({
      leases: o.leases,
      namespace: o.namespace,
      name,
      identity: o.identity,
      leaseDurationMs: o.leaseDurationMs,
      renewDeadlineMs: o.renewDeadlineMs,
      retryPeriodMs: o.retryPeriodMs,
      clock: o.clock,
      releaseOnCancel: true,
      log: o.log,
      callbacks: {
        onStartedLeading: () => {
          this.#member = true;
          o.log.info({ member: o.member }, 'Joined controller replicas');
          this.#wake();
        },
        onStoppedLeading: () => {
          this.#member = false;
          if (!this.#stopping) o.onMembershipLost();
        },
      },
    });
    this.#membershipRun = this.#membership.run(this.#abort.signal);
    this.#loopRun = this.#loop();
  }

  #membershipRun: Promise<void> = Promise.resolve();
  #loopRun: Promise<void> = Promise.resolve();
  #wakeUp: (() => void) | undefined;

  /**
   * stop gives every shard and the membership up: call it after the lock controllers stopped (no
   * reconcile in flight), so that the successors start at once without overlapping this replica.
   */
  async stop(): Promise<void> {
    this.#stopping = true;
    for (const t of this.#terms.values()) t.abort.abort(new Error('stopping'));
    await Promise.allSettled([...this.#terms.values()].map((t) => t.done));
    this.#abort.abort(new Error('stopping'));
    this.#wake();
    await Promise.allSettled([this.#membershipRun, this.#loopRun]);
  }

  #wake(): void {
    this.#wakeUp?.();
  }

  async #loop(): Promise<void> {
    const o = this.#o;
    const signal = this.#abort.signal;
    while (!signal.aborted) {
      try {
        await this.#step(signal);
      } catch (err) {
        if (signal.aborted) break;
        o.log.error({ err }, 'Failed to list controller members');
      }
      await new Promise<void>((resolve) => {
        this.#wakeUp = resolve;
        sleep(o.clock, o.retryPeriodMs, signal).then(resolve, resolve);
      });
      this.#wakeUp = undefined;
    }
  }

  /** #step reads the live members, and starts or gives up shard terms to match the assignment. */
  async #step(signal: AbortSignal): Promise<void> {
    const o = this.#o;
    if (!this.#member) return;
    const leases = await o.members.list(o.namespace, `${MEMBER_LABEL}=${o.id}`, signal);
    if (this.#stopping || !this.#member) return;
    const live = this.#liveMembers(leases);
    const mine = new Set(shardsOf(assignShards(o.shards, live), o.member));
    for (const s of mine) {
      const t = this.#terms.get(s);
      if (t === undefined) this.#campaign(s);
      else if (t.releasing && !t.abort.signal.aborted) t.releasing = false; // assigned back before it was given up
    }
    for (const [s, t] of this.#terms) {
      if (mine.has(s) || t.releasing) continue;
      if (!t.leading) {
        t.abort.abort(new Error('shard no longer assigned')); // only campaigning: nothing to drain
        continue;
      }
      t.releasing = true;
      o.log.info({ shard: s }, 'Giving up shard');
      this.#releaseIfDrained(s);
    }
  }

  /**
   * #liveMembers: the members whose membership record changed within its lease duration by our
   * clock (a released one, with no holder, is gone at once), and always this replica itself.
   */
  #liveMembers(leases: readonly V1Lease[]): string[] {
    const o = this.#o;
    const now = o.clock.monotonicMs();
    const prefix = `${o.id}-member-`;
    const live = new Set<string>([o.member]);
    const names = new Set<string>();
    for (const l of leases) {
      const name = l.metadata?.name ?? '';
      if (!name.startsWith(prefix)) continue;
      names.add(name);
      const spec = l.spec;
      const holder = spec?.holderIdentity ?? '';
      const fingerprint = [holder, stamp(spec?.renewTime), spec?.leaseTransitions ?? 0].join('|');
      const durationMs = Math.max(o.leaseDurationMs, (spec?.leaseDurationSeconds ?? 0) * 1000);
      const prev = this.#seen.get(name);
      const seen = prev?.fingerprint === fingerprint ? prev : { fingerprint, atMs: now, durationMs };
      this.#seen.set(name, seen);
      if (holder !== '' && now - seen.atMs < seen.durationMs) live.add(name.slice(prefix.length));
    }
    for (const name of this.#seen.keys()) if (!names.has(name)) this.#seen.delete(name);
    return [...live];
  }

  /** #campaign starts a term for shard `s`: a LeaderElector on its Lease, run until given up or lost. */
  #campaign(s: number): void {
    const o = this.#o;
    const term: Term = { abort: new AbortController(), leading: false, releasing: false, done: Promise.resolve() };
    const elector = new LeaderElector({
      leases: o.leases,
      namespace: o.namespace,
      name: shardLeaseName(o.id, s),
      identity: o.identity,
      leaseDurationMs: o.leaseDurationMs,
      renewDeadlineMs: o.renewDeadlineMs,
      retryPeriodMs: o.retryPeriodMs,
      clock: o.clock,
      releaseOnCancel: true,
      log: o.log,
      callbacks: {
        onStartedLeading: () => {
          term.leading = true;
          o.log.info({ shard: s }, 'Acquired shard');
          this.#changed();
          const inShard = (key: ObjectKey): boolean => this.shardOf(key) === s;
          for (const l of this.#listeners) l(inShard);
        },
        onStoppedLeading: () => {
          term.leading = false;
          o.log.info({ shard: s }, 'Stopped holding shard');
          this.#changed();
        },
      },
    });
    this.#terms.set(s, term);
    term.done = elector
      .run(term.abort.signal)
      .catch((err: unknown) => {
        o.log.error({ err, shard: s }, 'Shard election failed');
      })
      .finally(() => {
        if (this.#terms.get(s) === term) this.#terms.delete(s);
        this.#wake(); // still assigned after a lost term: campaign again at once
      });
  }

  /** #releaseIfDrained gives up shard `s` (releasing its Lease) once nothing of it is in flight. */
  #releaseIfDrained(s: number): void {
    const t = this.#terms.get(s);
    if (t === undefined || !t.releasing || (this.#inFlight.get(s) ?? 0) > 0) return;
    t.abort.abort(new Error('shard no longer assigned'));
  }

  #changed(): void {
    this.#o.onShardsChanged?.(this.owned());
  }
}

/** stamp is a comparable form of a MicroTime field (client-node gives strings or Dates). */
function stamp(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v instanceof Date) return v.toISOString();
  return '';
}
