/**
 * The one-Lease policy: Election and Mutex locks, one holder on the lock's own Lease. What sets the
 * two modes apart — who is granted next (priority, or first come first served), the queue, a
 * released Mutex not handed straight back — is decided in decide.ts; here is only the I/O loop
 * around it, over the shared grant and end-of-term path of lock-io.ts.
 *
 * Order of side effects for a grant, so that a crash at any point leaves a state the next reconcile
 * finishes: (1) take a token from the fencing backend, (2) compare-and-swap the Lease to the new
 * holder and token, (3) label and annotate the holder pod, (4) patch status. A crash after (1)
 * burns a token (a harmless gap); after (2) the next reconcile does (3) and (4); a pod is never
 * marked with a token the Lease does not hold. test/unit/controllers/reconciler-order.test.ts pins
 * the order and what a crash after each step leaves; the model test (test/property/race) runs this
 * under fast-check's scheduler with crashes before each write.
 */
import type { V1Lease } from '@kubernetes/client-node';
import { EventReason } from '../../api/v1alpha1/conditions.ts';
import { resolveTimings, type DistributedLock } from '../../api/v1alpha1/distributedlock.ts';
import type { FenceResult } from '../../fencing/redis-fence.ts';
import {
  grantedLease,
  handoverMarkedLease,
  newLease,
  releasedLease,
  parseLeaseTolerant,
  type LockRecord,
} from '../../lease/record.ts';
import { holderIdentity } from '../../protocol/holder.ts';
import { TOKEN_ANNOTATION, leaseName } from '../../protocol/names.ts';
import type { ObjectKey, Result } from '../../runtime/controller.ts';
import { TerminalError, isAlreadyExists, isConflict } from '../../runtime/errors.ts';
import { decide, unactionable, type Action, type Decision, type Observation } from './decide.ts';
import {
  answerHandover,
  reportBadPriorities,
  reportRefusedCompletions,
  reportTampering,
} from './lease-lock-reports.ts';
import { END_REASON, describeCause, endMessage, lockRef, type CallContext, type LockIO } from './lock-io.ts';
import { summarizePod } from './pods.ts';
import { computeStatus } from './status.ts';

/**
 * MAX_PASSES bounds the observe→act loop of one reconcile: create the Lease, record it in status,
 * grant, one re-read after a conflict, and the final look.
 */
const MAX_PASSES = 6;

/** LEASE_ACTIONS are the actions that write the Lease: one per pass, decided again after each. */
const LEASE_ACTIONS = new Set<Action['type']>(['CreateLease', 'Grant', 'Revoke', 'MarkHandover', 'ForceRelease']);

/** LeaseLockPolicy reconciles an Election lock (`reportsPriorities`) or a Mutex lock. */
export class LeaseLockPolicy {
  readonly #io: LockIO;
  /** #reportsPriorities: Election candidates are ranked by their priority annotation; an invalid one is reported. */
  readonly #reportsPriorities: boolean;

  constructor(io: LockIO, o: { readonly reportsPriorities: boolean }) {
    this.#io = io;
    this.#reportsPriorities = o.reportsPriorities;
  }

  // Observe → decide → act, until no Lease action remains.
  //
  // Reads come from the informers' caches, never a GET on the way to a grant: every Lease write is
  // a compare-and-swap on the resourceVersion of the Lease it was decided from, so a cache that is
  // behind costs a 409, never a wrong grant. After a write of ours the loop goes on from the
  // server's answer (the cache has not seen it yet); after a 409 it reads the Lease once and
  // decides again (DESIGN: "On conflict: re-read and decide again"), without a trip through the
  // rate-limited queue.
  async apply(key: ObjectKey, lock: DistributedLock, ctx: CallContext, finalizerAdded: boolean): Promise<Result> {
    const io = this.#io;
    const { log, signal } = ctx;
    const namespace = lock.metadata.namespace ?? '';
    const lName = leaseName(lock.metadata.name ?? '');
    let current = lock;
    /** known: the Lease as our last write (or re-read) left it, which the cache may not show yet. */
    let known: { readonly lease: V1Lease | undefined } | undefined;
    let recorded = false;
    let obs: Observation | undefined;
    let dec: Decision | undefined;
    for (let pass = 0; pass < MAX_PASSES; pass++) {
      const lease = known !== undefined ? known.lease : io.cachedLease(key, namespace, lName);
      obs = { ...this.#observe(key, current, lease), finalized: finalizerAdded ? 'now' : 'before' };
      dec = decide(obs, io.d.clock.monotonicMs());
      reportTampering(io, key, current, obs, dec, log);
      const leaseAction = dec.actions.find((a) => LEASE_ACTIONS.has(a.type));
      if (leaseAction !== undefined) {
        try {
          known = { lease: await this.#actOnLease(key, current, obs, lease, leaseAction, ctx) };
        } catch (err) {
          io.memory(key).expected = undefined;
          // A grant that creates the Lease finds it made meanwhile (AlreadyExists): a conflict too.
          const raced =
            isConflict(err) || (leaseAction.type === 'Grant' && leaseAction.create === true && isAlreadyExists(err));
          if (!raced || pass === MAX_PASSES - 1) {
            if (leaseAction.type === 'Grant') await this.#reportGrantFailure(key, current, obs, dec, err, signal);
            throw err;
          }
          log.debug({ lease: lName }, 'Lease changed since it was read; reading it again');
          known = { lease: await io.d.leaseStore.get(namespace, lName, { signal }) };
        }
        if (leaseAction.type === 'Grant') io.memory(key).grantFailure = undefined;
        io.expect(key, known.lease);
        continue;
      }
      if (dec.waiting === 'LeaseNotRecorded' && !recorded) {
        // The first grant waits until status records the Lease: write that now and go on to the
        // grant in this same reconcile, rather than after another trip through the queue.
        const status = computeStatus(obs, dec, current.status, io.d.clock.now());
        await io.writeStatus(current, status, signal);
        current = { ...current, status };
        recorded = true;
        continue;
      }
      break;
    }
    if (obs === undefined || dec === undefined) return {};
    // Pod labels and annotations; answers to handover requests.
    for (const a of dec.actions) {
      if (a.type === 'MarkHolderPod') await io.markPod(current, obs.lease?.record, lName, a.pod, a.token, ctx);
      if (a.type === 'UnmarkPod') await io.unmarkPod(current, a.pod, ctx);
      if (a.type === 'AnswerHandover') await answerHandover(io, current, a.answer, ctx);
    }
    // Status, written only when it changed; fencing and tampering transitions as Events.
    io.reportFencing(key, current, obs.fencing, log);
    const now = io.d.clock.now();
    reportRefusedCompletions(io, key, current, obs, now, log);
    if (this.#reportsPriorities) reportBadPriorities(io, key, current, dec, log);
    const status = computeStatus(obs, dec, current.status, now);
    await io.writeStatus(current, status, signal);
    // A spec no retry can fix (status says Ready=False, InvalidSpec): fail without requeue; the lock waits for an event.
    const stuck = unactionable(obs, dec);
    if (stuck !== undefined) throw new TerminalError(`Cannot act on DistributedLock: ${stuck}`);
    return { requeueAfterMs: dec.requeueAfterMs };
  }

  /**
   * #reportGrantFailure records why a grant failed (not a conflict: that is decided again) and
   * writes status with Ready=False (GrantFailed, the error's message) before the error goes to the
   * queue's backoff, so that a lock that cannot be granted never shows Ready. A failed status
   * write is left to the retry; nothing is recorded after a shutdown.
   */
  async #reportGrantFailure(
    key: ObjectKey,
    lock: DistributedLock,
    obs: Observation,
    dec: Decision,
    err: unknown,
    signal: AbortSignal,
  ): Promise<void> {
    if (signal.aborted) return; // a shutdown is no failure of the lock, and nothing is written after it
    const why = (e: unknown): string =>
      e instanceof Error ? (e.cause !== undefined ? `${e.message}: ${why(e.cause)}` : e.message) : String(e);
    const message = why(err);
    this.#io.memory(key).grantFailure = message;
    const status = computeStatus({ ...obs, grantFailure: message }, dec, lock.status, this.#io.d.clock.now());
    await this.#io.writeStatus(lock, status, signal).catch(() => undefined);
  }

  /** #observe gathers the Observation of the lock with `lease` (from the cache, or our last write). */
  #observe(key: ObjectKey, lock: DistributedLock, lease: V1Lease | undefined): Observation {
    const io = this.#io;
    const m = io.memory(key);
    let leaseView: Observation['lease'];
    let malformedToken: string | undefined;
    if (lease !== undefined) {
      const parsed = parseLeaseTolerant(lease);
      malformedToken = parsed.malformedToken;
      leaseView = {
        record: parsed.record,
        observedAtMs: io.observedAt(key, leaseName(lock.metadata.name ?? ''), parsed.record),
      };
    }
    return {
      lock,
      timings: resolveTimings(lock.spec),
      lease: leaseView,
      pods: io.podsOf(lock).map(summarizePod),
      podsSynced: io.d.pods.hasSynced(),
      fencing: io.fencingOf(lock),
      requests: m.queue ?? lock.status?.queue ?? [],
      ...this.#handoverSeen(key, leaseView?.record),
      ...(m.grantFailure !== undefined ? { grantFailure: m.grantFailure } : {}),
      ...(malformedToken !== undefined ? { malformedToken } : {}),
      wallNowMs: io.d.clock.now().getTime(),
    };
  }

  /**
   * #handoverSeen: our monotonic time when we first saw the Lease's current handover mark (the
   * handover's timeout counts from it, on our own clock, as expiry does). A restarted controller
   * starts counting again at its first sight: a handover lapses later, never earlier.
   */
  #handoverSeen(key: ObjectKey, record: LockRecord | undefined): { handoverMarkSeenAtMs?: number } {
    const m = this.#io.memory(key);
    const mark = record?.handover;
    if (mark === undefined || record?.holder === undefined) {
      m.handoverMark = undefined;
      return {};
    }
    const fingerprint = `${holderIdentity(mark.to)}|${mark.token}|${mark.drainMs}`;
    const seen = m.handoverMark;
    if (seen !== undefined && seen.fingerprint === fingerprint) return { handoverMarkSeenAtMs: seen.atMs };
    const atMs = this.#io.d.clock.monotonicMs();
    m.handoverMark = { fingerprint, atMs };
    return { handoverMarkSeenAtMs: atMs };
  }

  async #actOnLease(
    key: ObjectKey,
    lock: DistributedLock,
    obs: Observation,
    read: V1Lease | undefined,
    action: Action,
    ctx: CallContext,
  ): Promise<V1Lease | undefined> {
    const io = this.#io;
    const { log, signal } = ctx;
    const namespace = lock.metadata.namespace ?? '';
    const name = leaseName(lock.metadata.name ?? '');
    switch (action.type) {
      case 'CreateLease': {
        const { lease, created } = await io.createLease(namespace, newLease(lockRef(lock), action.lost), ctx);
        if (!created) return lease;
        if (action.lost !== undefined) {
          log.info(
            { lease: name, lastHolder: action.lost.holder?.name },
            'Created Lease again after it was deleted while held',
          );
          io.event(
            lock,
            'Warning',
            EventReason.LeaseLost,
            `The Lease was deleted while ${action.lost.holder !== undefined ? `pod ${action.lost.holder.name} held the lock` : 'an earlier lost term was still being waited out'}; created it again, and no grant for ${action.lost.leaseDurationSeconds}s while the old holder steps down`,
          );
        } else {
          log.info({ lease: name }, 'Created Lease');
        }
        return lease;
      }
      case 'Grant':
        return this.#grant(key, lock, obs, read, action, ctx);
      case 'ForceRelease': {
        if (read === undefined) throw new Error(`Lease ${namespace}/${name} vanished before the forced release`);
        const revoked = await io.d.leaseStore.replace(namespace, name, releasedLease(read, 'Revoked'), { signal }); // CAS
        this.#observeHold(obs, 'ForceReleased');
        log.info({ holder: action.holder.name, by: action.by }, 'Force-released Lease');
        io.event(
          lock,
          'Warning',
          EventReason.ForceReleased,
          `${action.by !== undefined ? `${action.by} forced` : 'A user forced'} the release of pod ${action.holder.name}'s grant (token ${String(obs.lease?.record.token)}); the pod may still be running: only fencing guards stop its writes`,
        );
        return revoked;
      }
      case 'MarkHandover': {
        if (read === undefined) throw new Error(`Lease ${namespace}/${name} vanished before the handover mark`);
        const marked = await io.d.leaseStore.replace(namespace, name, handoverMarkedLease(read, action.mark), {
          signal,
        }); // CAS: a holder's renewal in between is a 409, and we decide again
        const holder = obs.lease?.record.holder?.name ?? '?';
        if (action.mark !== undefined) {
          log.info({ holder, to: action.mark.to.name, drainMs: action.mark.drainMs }, 'Marked Lease for handover');
          io.event(
            lock,
            'Normal',
            EventReason.HandoverStarted,
            `Handing over from pod ${holder} (token ${action.mark.token}) to pod ${action.mark.to.name}${action.why !== undefined ? ` because ${action.why}` : ''}: the holder's agent drains for up to ${action.mark.drainMs / 1000}s, then releases`,
          );
        } else {
          log.info({ holder }, 'Removed the handover mark from the Lease');
        }
        return marked;
      }
      case 'Revoke': {
        if (read === undefined) throw new Error(`Lease ${namespace}/${name} vanished before the revoke`);
        const end = { cause: action.cause, holder: action.holder, outcome: 'lock revoked' };
        const revoked = await io.endTerm(lock, name, read, end, ctx);
        this.#observeHold(obs, action.cause);
        return revoked;
      }
      default:
        return read;
    }
  }

  /** #grant is the shared grant path for the lock's one Lease: token, compare-and-swap, metrics, Events. */
  async #grant(
    key: ObjectKey,
    lock: DistributedLock,
    obs: Observation,
    read: V1Lease | undefined,
    action: Extract<Action, { type: 'Grant' }>,
    ctx: CallContext,
  ): Promise<V1Lease> {
    const io = this.#io;
    const { log, signal } = ctx;
    const namespace = lock.metadata.namespace ?? '';
    const name = leaseName(lock.metadata.name ?? '');
    if (read === undefined && action.create !== true)
      throw new Error(`Lease ${namespace}/${name} vanished before the grant`);
    const current = read ?? newLease(lockRef(lock), undefined);
    const issued = await io.issueToken(key, lock, action.floor, ctx);
    const fencing = io.d.fencing.forLock(lock);
    const firstToken = current.metadata?.annotations?.[TOKEN_ANNOTATION] === undefined;
    const loss = fenceLoss(issued, firstToken);
    if (loss !== undefined) {
      io.d.metrics?.fencingRefloored.inc({ reason: loss });
      io.event(
        lock,
        'Warning',
        EventReason.FencingRefloored,
        `${LOSS_MESSAGE[loss]} (key ${fencing.key}); issued token ${issued.token} above the etcd high-water mark ${action.floor}`,
      );
      log.info(
        { key: fencing.key, floor: action.floor.toString(), token: issued.token.toString(), reason: loss },
        'Re-floored fencing counter',
      );
    }
    const body = grantedLease(current, action.to, issued.token, obs.timings, io.d.clock.now(), action.request);
    signal.throwIfAborted(); // a token burnt by a shutdown is a harmless gap; a grant after it is not ours to make
    // CAS on resourceVersion (409 → re-read); a lock's first grant creates the Lease (409 AlreadyExists → re-read).
    const granted =
      read === undefined
        ? await io.d.leaseStore.create(namespace, body, { signal })
        : await io.d.leaseStore.replace(namespace, name, body, { signal });
    io.d.metrics?.grants.inc({ cause: action.cause, backend: fencing.backend });
    if (obs.lease !== undefined && action.cause !== 'Vacant') {
      io.d.metrics?.handoffDuration.observe(
        { cause: action.cause },
        (io.d.clock.monotonicMs() - obs.lease.observedAtMs) / 1000,
      );
    }
    this.#observeHold(obs, action.cause);
    if (action.cause === 'Expired' || action.cause === 'HolderTerminated')
      io.d.metrics?.expirations.inc({ cause: action.cause });
    if (action.cause === 'Released') io.d.metrics?.releasesObserved.inc();
    log.info(
      {
        holder: action.to.name,
        uid: action.to.uid,
        token: issued.token.toString(),
        cause: action.cause,
        previous: action.previous?.name,
      },
      'Granted Lease',
    );
    if ((action.cause === 'Expired' || action.cause === 'HolderTerminated') && action.previous !== undefined) {
      // The term ended involuntarily and went straight to a successor: report the end under
      // its own reason too, as the Revoke path does, so that alerts on it see every one.
      io.event(
        lock,
        'Warning',
        END_REASON[action.cause],
        endMessage(action.cause, action.previous, 'lock handed over'),
      );
    }
    io.event(
      lock,
      'Normal',
      EventReason.LeaseGranted,
      `Granted to pod ${action.to.name} with fencing token ${issued.token} (${describeCause(action.cause, action.previous)})`,
    );
    return granted;
  }

  /** #observeHold records how long an involuntarily ended term lasted (releases clear acquireTime). */
  #observeHold(obs: Observation, cause: string): void {
    const acquired = obs.lease?.record.acquireTime;
    if (obs.lease?.record.holder === undefined || acquired === undefined) return;
    this.#io.d.metrics?.holdDuration.observe(
      { cause },
      Math.max(0, this.#io.d.clock.now().getTime() - acquired.getTime()) / 1000,
    );
  }
}

type FenceLoss = 'ttl' | 'key_lost' | 'counter_behind';

const LOSS_MESSAGE: Record<FenceLoss, string> = {
  ttl: 'The Redis fencing counter had a TTL, which fencepost removed',
  key_lost: 'The Redis fencing counter was missing although tokens were issued before (Redis lost data)',
  counter_behind: 'The Redis fencing counter was behind tokens already issued (restored or failed over to older data)',
};

/** fenceLoss says what the dispenser had to repair, if anything; seeding a new lock's counter is not a loss. */
function fenceLoss(r: FenceResult, firstToken: boolean): FenceLoss | undefined {
  if (r.hadTtl) return 'ttl';
  if (!r.refloored) return undefined;
  if (!r.existed) return firstToken ? undefined : 'key_lost';
  return 'counter_behind';
}
