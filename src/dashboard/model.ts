/**
 * DashboardModel folds what the watches see — DistributedLocks, their Leases, their Events — into
 * one entry per lock, and renders each entry as the page's {@link LockView} and timeline. No I/O
 * and no clock: every method is given the object the watch delivered and says which lock changed,
 * so sources.ts (the watches) and server.ts (the pushes) stay thin, and the tests feed it by hand.
 *
 * Sources of each field, most live first: a lock held through the Lease store shows its Lease's
 * holder, token and renewTime (the Lease changes at the grant and at every renewal; the lock's
 * status follows at the next reconcile and records transitions only). A Semaphore shows its permit
 * Leases. A lock held in a Redis or Redlock store (spec.store) has no Lease: its status is all
 * there is, and its expiry is status.acquireTime + leaseDurationSeconds.
 *
 * Bounded memory: per lock at most {@link MAX_EVENTS} Events (the newest) and
 * {@link MAX_RENEWALS} renewal entries, consecutive renewals of one term folded into one.
 */
import type { CoreV1Event, V1Lease } from '@kubernetes/client-node';
import { ConditionType, findCondition } from '../api/v1alpha1/conditions.ts';
import { DEFAULT_MODE, storeOf, type DistributedLock } from '../api/v1alpha1/distributedlock.ts';
import { parseLease } from '../lease/record.ts';
import { LOCK_LABEL, leaseName, permitOfLease } from '../protocol/names.ts';
import { entryOfEvent, lockKeyOfEvent, timeOf } from './timeline.ts';
import type { LockDetail, LockView, PermitView, TimelineEntry } from './wire.ts';

/** MAX_EVENTS: Events kept per lock (the newest by time). */
export const MAX_EVENTS = 50;
/** MAX_RENEWALS: renewal entries kept per lock; one entry stands for every renewal of a term in a row. */
export const MAX_RENEWALS = 20;
/** RECENT: timeline entries shown in the list's "last transitions" column. */
export const RECENT = 3;

/** RawScope: see {@link DashboardModel.rawScope}. */
export interface RawScope {
  /** locks: the names of the namespace's locks (their Events belong to them). */
  readonly locks: ReadonlySet<string>;
  /** leases: their Leases' names (lock and permit Leases). */
  readonly leases: ReadonlySet<string>;
  /** pods: the pods their state names: holders, permit holders, queued requests. */
  readonly pods: ReadonlySet<string>;
}

/** Change is how a watch saw an object change. */
export type Change = 'add' | 'update' | 'delete';

/** LeaseSeen is what the model keeps of one Lease of a lock. */
interface LeaseSeen {
  readonly permit: number | undefined;
  readonly holder: string | undefined;
  readonly holderUid: string | undefined;
  readonly token: string | undefined;
  readonly acquireTime: string | undefined;
  readonly renewTime: string | undefined;
  readonly leaseDurationSeconds: number | undefined;
  readonly transitions: number;
}

/** Entry is everything the model knows of one lock; the lock itself may arrive after its Leases or Events. */
interface Entry {
  lock: DistributedLock | undefined;
  readonly leases: Map<string, LeaseSeen>;
  /** events by Event uid (an Event is updated in place when its count goes up). */
  readonly events: Map<string, TimelineEntry>;
  readonly renewals: TimelineEntry[];
}

const keyOf = (namespace: string, name: string): string => `${namespace}/${name}`;

/** DashboardModel: see the module comment. Not safe to share between unrelated sources: one per dashboard. */
export class DashboardModel {
  readonly #entries = new Map<string, Entry>();

  /** keys are the locks the model shows (those whose DistributedLock it has seen), in no particular order. */
  keys(): string[] {
    return [...this.#entries].filter(([, e]) => e.lock !== undefined).map(([k]) => k);
  }

  #entry(key: string): Entry {
    let e = this.#entries.get(key);
    if (e === undefined) {
      e = { lock: undefined, leases: new Map(), events: new Map(), renewals: [] };
      this.#entries.set(key, e);
    }
    return e;
  }

  /** #prune forgets an entry that nothing refers to any more. */
  #prune(key: string): void {
    const e = this.#entries.get(key);
    if (e !== undefined && e.lock === undefined && e.leases.size === 0 && e.events.size === 0)
      this.#entries.delete(key);
  }

  /** applyLock folds a DistributedLock change; returns the key of the lock it changed. */
  applyLock(lock: DistributedLock, change: Change): string {
    const key = keyOf(lock.metadata.namespace ?? '', lock.metadata.name ?? '');
    if (change === 'delete') {
      // Its Leases go with it (owner references); its Events outlive it, but nothing shows them.
      this.#entries.delete(key);
      return key;
    }
    this.#entry(key).lock = lock;
    return key;
  }

  /**
   * applyLease folds a change of a Lease labelled with a lock (`fencepost.io/lock`); returns the
   * lock's key, or undefined for a Lease that belongs to no lock. A renewal (same holder and
   * token, later renewTime) becomes a `Renewed` timeline entry, folded into the previous one when
   * that was a renewal of the same term.
   */
  applyLease(lease: V1Lease, change: Change): string | undefined {
    const lockName = lease.metadata?.labels?.[LOCK_LABEL];
    const name = lease.metadata?.name ?? '';
    if (lockName === undefined) return undefined;
    const key = keyOf(lease.metadata?.namespace ?? '', lockName);
    const permit = permitOfLease(lockName, name);
    if (name !== leaseName(lockName) && permit === undefined) return undefined;
    if (change === 'delete') {
      const e = this.#entries.get(key);
      e?.leases.delete(name);
      this.#prune(key);
      return key;
    }
    const e = this.#entry(key);
    const seen = leaseSeen(lease, permit);
    const before = e.leases.get(name);
    e.leases.set(name, seen);
    if (
      before !== undefined &&
      seen.holder !== undefined &&
      seen.holder === before.holder &&
      seen.token === before.token &&
      seen.renewTime !== undefined &&
      seen.renewTime !== before.renewTime
    )
      this.#renewed(e, seen);
    return key;
  }

  #renewed(e: Entry, l: LeaseSeen): void {
    const last = e.renewals.at(-1);
    const base = {
      time: l.renewTime ?? '',
      kind: 'Renewed',
      warning: false,
      ...(l.holder !== undefined ? { holder: l.holder } : {}),
      ...(l.token !== undefined ? { token: l.token } : {}),
    };
    const permit = l.permit !== undefined ? ` (permit ${l.permit})` : '';
    if (last !== undefined && last.holder === l.holder && last.token === l.token) {
      const count = last.count + 1;
      e.renewals[e.renewals.length - 1] = {
        ...base,
        count,
        message: `Pod ${l.holder ?? ''} renewed${permit} ${count} times, last at ${base.time}`,
      };
      return;
    }
    e.renewals.push({ ...base, count: 1, message: `Pod ${l.holder ?? ''} renewed${permit}` });
    if (e.renewals.length > MAX_RENEWALS) e.renewals.shift();
  }

  /** applyEvent folds an Event about a lock (or an agent's LockLost); returns the lock's key, or undefined. */
  applyEvent(event: CoreV1Event, change: Change): string | undefined {
    const key = lockKeyOfEvent(event);
    if (key === undefined) return undefined;
    const uid = event.metadata.uid ?? `${event.metadata.namespace ?? ''}/${event.metadata.name ?? ''}`;
    if (change === 'delete') {
      // Events expire (the API server's --event-ttl); the timeline keeps what it has seen.
      return undefined;
    }
    const e = this.#entry(key);
    e.events.set(uid, entryOfEvent(event));
    if (e.events.size > MAX_EVENTS) {
      let oldest: [string, TimelineEntry] | undefined;
      for (const kv of e.events) if (oldest === undefined || kv[1].time < oldest[1].time) oldest = kv;
      if (oldest !== undefined) e.events.delete(oldest[0]);
    }
    return key;
  }

  /** view renders one lock for the list, or undefined when the model has not seen the lock itself. */
  view(key: string): LockView | undefined {
    const e = this.#entries.get(key);
    if (e?.lock === undefined) return undefined;
    return viewOf(key, e.lock, e);
  }

  /** views renders every lock, sorted by namespace and name. */
  views(): LockView[] {
    return this.keys()
      .sort()
      .map((k) => this.view(k))
      .filter((v): v is LockView => v !== undefined);
  }

  /**
   * rawScope says which objects of a namespace belong to its locks, for the raw views (server.ts):
   * a lock's Events (by the lock's name), its Lease and permit Leases, the pods its state names
   * (holder, permit holders, queued requests). Only locks the model has seen count.
   */
  rawScope(namespace: string): RawScope {
    const locks = new Set<string>();
    const leases = new Set<string>();
    const pods = new Set<string>();
    for (const [key, e] of this.#entries) {
      if (e.lock === undefined || e.lock.metadata.namespace !== namespace) continue;
      const name = e.lock.metadata.name ?? '';
      locks.add(name);
      leases.add(leaseName(name));
      if (e.lock.status?.leaseName !== undefined) leases.add(e.lock.status.leaseName);
      for (const l of e.leases.keys()) leases.add(l);
      const v = viewOf(key, e.lock, e);
      if (v.holder !== undefined) pods.add(v.holder);
      for (const p of v.holders) pods.add(p.holder);
      for (const q of v.queue) pods.add(q);
    }
    return { locks, leases, pods };
  }

  /** detail renders one lock with its timeline (Events and renewals, oldest first), or undefined. */
  detail(key: string): LockDetail | undefined {
    const e = this.#entries.get(key);
    if (e?.lock === undefined) return undefined;
    return { lock: viewOf(key, e.lock, e), timeline: timelineOf(e) };
  }
}

/** timelineOf merges a lock's Events and renewal entries, oldest first (ties: Events first). */
function timelineOf(e: Entry): TimelineEntry[] {
  return [...e.events.values(), ...e.renewals].sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : 0));
}

function leaseSeen(lease: V1Lease, permit: number | undefined): LeaseSeen {
  let token: string | undefined;
  let holder: { name: string; uid: string } | undefined;
  try {
    const r = parseLease(lease);
    token = r.token?.toString();
    holder = r.holder;
  } catch {
    // A malformed token annotation: the controller refuses to grant from it; the page shows no token.
    holder = undefined;
  }
  const spec = lease.spec ?? {};
  return {
    permit,
    holder: holder?.name,
    holderUid: holder?.uid,
    token,
    acquireTime: timeOf(spec.acquireTime),
    renewTime: timeOf(spec.renewTime),
    leaseDurationSeconds: spec.leaseDurationSeconds,
    transitions: spec.leaseTransitions ?? 0,
  };
}

/** expiryOf: renewTime (or acquireTime) + leaseDurationSeconds, RFC 3339; undefined when unknown. */
function expiryOf(from: string | undefined, seconds: number | undefined): string | undefined {
  if (from === undefined || seconds === undefined) return undefined;
  return new Date(Date.parse(from) + seconds * 1000).toISOString();
}

function viewOf(key: string, lock: DistributedLock, e: Entry): LockView {
  const status = lock.status ?? {};
  const namespace = lock.metadata.namespace ?? '';
  const name = lock.metadata.name ?? '';
  const mode = lock.spec.mode ?? DEFAULT_MODE;
  const store = storeOf(lock.spec);
  const anchor = e.leases.get(leaseName(name));
  const permits: PermitView[] = [...e.leases.values()]
    .filter(
      (l): l is LeaseSeen & { permit: number; holder: string } => l.permit !== undefined && l.holder !== undefined,
    )
    .sort((a, b) => a.permit - b.permit)
    .map((l) => ({
      permit: l.permit,
      holder: l.holder,
      token: l.token,
      expireTime: expiryOf(l.renewTime ?? l.acquireTime, l.leaseDurationSeconds),
    }));
  let holder: string | undefined;
  let holderUid: string | undefined;
  let token: string | undefined = status.fencingToken;
  let acquireTime: string | undefined = status.acquireTime;
  let leaseDurationSeconds: number | undefined = status.leaseDurationSeconds;
  let expireTime: string | undefined;
  if (mode === 'Semaphore') {
    const first = permits.map((p) => p.expireTime).filter((t): t is string => t !== undefined);
    expireTime = first.sort()[0];
    token = anchor?.token ?? token;
  } else if (store === 'Lease' && anchor !== undefined) {
    holder = anchor.holder;
    holderUid = anchor.holderUid;
    token = anchor.token ?? token;
    acquireTime = anchor.holder !== undefined ? anchor.acquireTime : acquireTime;
    leaseDurationSeconds = anchor.leaseDurationSeconds ?? leaseDurationSeconds;
    if (anchor.holder !== undefined)
      expireTime = expiryOf(anchor.renewTime ?? anchor.acquireTime, anchor.leaseDurationSeconds);
  } else {
    holder = status.holder?.name;
    holderUid = status.holder?.uid;
    if (holder !== undefined) expireTime = expiryOf(status.acquireTime, status.leaseDurationSeconds);
  }
  const held = holder !== undefined || permits.length > 0;
  const degraded = findCondition(status.conditions, ConditionType.Degraded);
  const heldCondition = findCondition(status.conditions, ConditionType.Held);
  const isDegraded = degraded?.status === 'True';
  const recent = [...e.events.values()].sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : 0)).slice(-RECENT);
  return {
    key,
    namespace,
    name,
    mode,
    store,
    state: held ? 'Held' : 'Free',
    degraded: isDegraded,
    reason: isDegraded ? (degraded.reason ?? '') : held ? '' : (heldCondition?.reason ?? ''),
    holder,
    holderUid,
    token,
    acquireTime: held ? acquireTime : undefined,
    expireTime,
    leaseDurationSeconds: held ? leaseDurationSeconds : undefined,
    leaseName: status.leaseName ?? (store === 'Lease' ? leaseName(name) : undefined),
    permits: lock.spec.permits,
    heldPermits: mode === 'Semaphore' ? permits.length : undefined,
    holders: permits,
    queue: (status.queue ?? []).map((q) => q.pod),
    transitions: anchor?.transitions ?? status.leaseTransitions,
    recent,
  };
}
