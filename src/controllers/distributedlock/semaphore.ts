/**
 * The Semaphore policy (decide-semaphore.ts decides): an anchor Lease, the lock-wide high-water
 * mark of its tokens, and one Lease per permit, over the shared grant and end-of-term path of
 * lock-io.ts.
 *
 * As the one-Lease policy: decide from the caches, act on the first Lease action, and decide again
 * from what we wrote (`written`, which the caches may not show yet); a 409 re-reads the Leases the
 * action touched. A grant is (1) the permit Lease as read, (2) a token above the floor, (3) the
 * anchor's compare-and-swap up to that token, (4) the permit Lease's compare-and-swap to the
 * holder: (1) before (3) is what keeps each permit's tokens in grant order.
 */
import type { V1Lease } from '@kubernetes/client-node';
import { EventReason } from '../../api/v1alpha1/conditions.ts';
import { resolveTimings, type DistributedLock } from '../../api/v1alpha1/distributedlock.ts';
import { grantedLease, leaseDurationSecondsFor, newLease, parseLease, raisedAnchor } from '../../lease/record.ts';
import { LOCK_LABEL, leaseName, permitLeaseName, permitOfLease } from '../../protocol/names.ts';
import { termTimingsOf } from '../../protocol/timings.ts';
import type { ObjectKey, Result } from '../../runtime/controller.ts';
import { isConflict } from '../../runtime/errors.ts';
import type { LeaseView } from './decide.ts';
import {
  decideSemaphore,
  type LostPermit,
  type PermitView,
  type SemaphoreAction,
  type SemaphoreDecision,
  type SemaphoreObservation,
} from './decide-semaphore.ts';
import { describeCause, lockRef, type CallContext, type LockIO } from './lock-io.ts';
import { summarizePod } from './pods.ts';
import { computeSemaphoreStatus } from './status.ts';

/**
 * MAX_PASSES bounds the observe→act loop of one Semaphore reconcile: a grant is one pass, a new
 * permit two; what is left goes on through the queue at once.
 */
const MAX_PASSES = 16;

/** Written: Leases as our own writes (or re-reads) in this reconcile left them; null: absent. */
type Written = Map<string, V1Lease | null>;

export class SemaphorePolicy {
  readonly #io: LockIO;

  constructor(io: LockIO) {
    this.#io = io;
  }

  async apply(key: ObjectKey, lock: DistributedLock, ctx: CallContext): Promise<Result> {
    const io = this.#io;
    const { signal } = ctx;
    const namespace = lock.metadata.namespace ?? '';
    const lockName = lock.metadata.name ?? '';
    const written: Written = new Map();
    let current = lock;
    let recorded = false;
    let obs: SemaphoreObservation | undefined;
    let dec: SemaphoreDecision | undefined;
    let pass = 0;
    for (; pass < MAX_PASSES; pass++) {
      obs = this.#observe(key, current, written);
      dec = decideSemaphore(obs, io.d.clock.monotonicMs());
      const act = dec.actions.find((a) => a.type !== 'MarkPermitHolderPod' && a.type !== 'UnmarkPod');
      if (act !== undefined) {
        try {
          await this.#act(key, current, obs, act, written, ctx);
        } catch (err) {
          if (!isConflict(err) || pass === MAX_PASSES - 1) throw err;
          ctx.log.debug({ action: act.type }, 'Lease changed since it was read; reading it again');
          const names = [leaseName(lockName), ...('permit' in act ? [permitLeaseName(lockName, act.permit)] : [])];
          for (const n of names) written.set(n, (await io.d.leaseStore.get(namespace, n, { signal })) ?? null);
        }
        continue;
      }
      if (dec.waiting === 'LeaseNotRecorded' && obs.anchor !== undefined && !recorded) {
        const status = computeSemaphoreStatus(obs, dec, current.status, io.d.clock.now());
        await io.writeStatus(current, status, signal);
        current = { ...current, status };
        recorded = true;
        continue;
      }
      break;
    }
    if (obs === undefined || dec === undefined) return {};
    for (const a of dec.actions) {
      if (a.type === 'MarkPermitHolderPod') {
        const view = obs.permits.find((p) => p.permit === a.permit)?.lease.record;
        await io.markPod(current, view, permitLeaseName(lockName, a.permit), a.pod, a.token, ctx);
      }
      if (a.type === 'UnmarkPod') await io.unmarkPod(current, a.pod, ctx);
    }
    io.reportFencing(key, current, obs.fencing, ctx.log);
    const status = computeSemaphoreStatus(obs, dec, current.status, io.d.clock.now());
    await io.writeStatus(current, status, signal);
    // Out of passes with Lease work left (many waiters at once): go on at once, through the queue.
    return { requeueAfterMs: pass === MAX_PASSES ? 0 : dec.requeueAfterMs };
  }

  /** permitLeases: the names of the lock's permit Leases in the cache (retired at deletion before the anchor). */
  permitLeases(lock: DistributedLock): string[] {
    const lockName = lock.metadata.name ?? '';
    return this.#io.d.leases
      .list(lock.metadata.namespace ?? '')
      .map((l) => l.metadata?.name ?? '')
      .filter((n) => permitOfLease(lockName, n) !== undefined);
  }

  /** #observe gathers a Semaphore's observation: the anchor and permit Leases (cache, or `written`), pods, fencing. */
  #observe(key: ObjectKey, lock: DistributedLock, written: Written): SemaphoreObservation {
    const io = this.#io;
    const namespace = lock.metadata.namespace ?? '';
    const lockName = lock.metadata.name ?? '';
    const byName = new Map<string, V1Lease>();
    for (const l of io.d.leases.list(namespace)) {
      const n = l.metadata?.name ?? '';
      if (l.metadata?.labels?.[LOCK_LABEL] === lockName) byName.set(n, l);
    }
    for (const [n, l] of written) {
      if (l === null) byName.delete(n);
      else byName.set(n, l);
    }
    const view = (l: V1Lease): LeaseView => {
      const record = parseLease(l);
      return { record, observedAtMs: io.observedAt(key, l.metadata?.name ?? '', record) };
    };
    const anchor = byName.get(leaseName(lockName));
    const permits: PermitView[] = [];
    for (const [n, l] of byName) {
      const permit = permitOfLease(lockName, n);
      if (permit !== undefined) permits.push({ permit, lease: view(l) });
    }
    // A permit Lease missing while status records a holder on it was deleted while held: that
    // holder may still believe (it cannot see a deletion while cut off), so the permit counts as
    // taken and is created again as Lost (decideSemaphore). Only once the pod cache has synced,
    // as the single-Lease lostTerm.
    const specMs = termTimingsOf(undefined, lock.spec).leaseDurationMs;
    // A permit Lease this reconcile deleted itself was vacant then: status, written after, lags.
    const deleted = (h: { readonly permit: number }): boolean =>
      written.get(permitLeaseName(lockName, h.permit)) === null;
    const lost: LostPermit[] = (lock.status?.holders ?? [])
      .filter((h) => !permits.some((p) => p.permit === h.permit) && !deleted(h))
      .map((h) => ({
        permit: h.permit,
        holder: { name: h.name, uid: h.uid },
        leaseDurationSeconds: leaseDurationSecondsFor(Math.max((h.leaseDurationSeconds ?? 0) * 1000, specMs)),
      }));
    return {
      lock,
      timings: resolveTimings(lock.spec),
      anchor: anchor !== undefined ? view(anchor) : undefined,
      permits,
      ...(lost.length > 0 ? { lost } : {}),
      pods: io.podsOf(lock).map(summarizePod),
      podsSynced: io.d.pods.hasSynced(),
      fencing: io.fencingOf(lock),
      requests: io.memory(key).queue ?? lock.status?.queue ?? [],
    };
  }

  /** #act performs one Lease action of a Semaphore decision and records the result in `written`. */
  async #act(
    key: ObjectKey,
    lock: DistributedLock,
    obs: SemaphoreObservation,
    action: SemaphoreAction,
    written: Written,
    ctx: CallContext,
  ): Promise<void> {
    const io = this.#io;
    const { log, signal } = ctx;
    const namespace = lock.metadata.namespace ?? '';
    const lockName = lock.metadata.name ?? '';
    const anchorName = leaseName(lockName);
    const objectOf = (name: string): V1Lease | undefined => {
      const w = written.get(name);
      return w === null ? undefined : (w ?? io.d.leases.get(namespace, name));
    };
    const create = async (body: V1Lease): Promise<void> => {
      const name = body.metadata?.name ?? '';
      const { lease, created } = await io.createLease(namespace, body, ctx);
      written.set(name, lease ?? null);
      if (created) log.info({ lease: name }, 'Created Lease');
    };
    switch (action.type) {
      case 'CreateAnchor':
        return create(newLease(lockRef(lock), undefined));
      case 'CreatePermit':
        return create(newLease(lockRef(lock), action.lost, action.permit));
      case 'GrantPermit': {
        const name = permitLeaseName(lockName, action.permit);
        // (1) The permit Lease as read: its resourceVersion is what the grant's CAS will use.
        const permitLease = objectOf(name);
        const anchor = objectOf(anchorName);
        if (permitLease === undefined || anchor === undefined)
          throw new Error(
            `Lease ${namespace}/${permitLease === undefined ? name : anchorName} vanished before the grant`,
          );
        const issued = await io.issueToken(key, lock, action.floor, ctx); // (2)
        if (issued.token <= action.floor)
          throw new Error(`Fencing token ${issued.token} not above the floor ${action.floor}; not granted`);
        signal.throwIfAborted(); // a burnt token is a harmless gap; a grant after shutdown is not ours to make
        // (3) The lock-wide high-water mark first: a 409 here means another grant raised it.
        written.set(
          anchorName,
          await io.d.leaseStore.replace(namespace, anchorName, raisedAnchor(anchor, issued.token), { signal }),
        );
        // (4) The permit, from the Lease as read in (1): a 409 means it changed since.
        const body = grantedLease(permitLease, action.to, issued.token, obs.timings, io.d.clock.now());
        written.set(name, await io.d.leaseStore.replace(namespace, name, body, { signal }));
        io.d.metrics?.grants.inc({ cause: action.cause, backend: io.d.fencing.forLock(lock).backend });
        log.info(
          {
            lease: name,
            permit: action.permit,
            holder: action.to.name,
            uid: action.to.uid,
            token: issued.token.toString(),
            cause: action.cause,
          },
          'Granted permit Lease',
        );
        io.event(
          lock,
          'Normal',
          EventReason.LeaseGranted,
          `Granted permit ${action.permit} to pod ${action.to.name} with fencing token ${issued.token} (${describeCause(action.cause, action.previous)})`,
        );
        return;
      }
      case 'RevokePermit': {
        const name = permitLeaseName(lockName, action.permit);
        const held = objectOf(name);
        if (held === undefined) throw new Error(`Lease ${namespace}/${name} vanished before the revoke`);
        const end = { cause: action.cause, holder: action.holder, outcome: `permit ${action.permit} revoked` };
        written.set(name, await io.endTerm(lock, name, held, end, ctx));
        return;
      }
      case 'DeletePermit': {
        // Only the version decided from: a grant of it since (another leader) makes this a 409.
        const name = permitLeaseName(lockName, action.permit);
        const vacant = objectOf(name);
        if (vacant === undefined) return;
        const opts = {
          signal,
          ...(vacant.metadata?.resourceVersion !== undefined
            ? { resourceVersion: vacant.metadata.resourceVersion }
            : {}),
        };
        await io.d.leaseStore.delete(namespace, name, opts);
        written.set(name, null);
        log.info({ lease: name, permit: action.permit }, 'Deleted permit Lease above spec.permits');
        return;
      }
      default:
        return;
    }
  }
}
