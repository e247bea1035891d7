/**
 * acquire — the agent's logic in-process, for Node applications:
 *
 *   await using lock = await acquire('billing');
 *   await store.write(key, value, lock.token);          // pass the token to every fenced write
 *   doWork({ signal: lock.signal });                     // aborted when the lock is lost, or handed over
 *
 * The pod identity comes from the downward API (POD_NAME, POD_NAMESPACE, POD_UID) unless given.
 * The controller decides who is granted (Election mode: the oldest Ready candidate); acquire
 * waits until this pod is, and its own first renew confirmed it.
 *
 * A pod is one candidate: one session per lock per pod at a time. acquire first claims the lock
 * for its pod (agent/session-claim.ts) and throws SessionInUseError at once if another session in
 * the pod — another acquire(), a `fencepost exec`, the `fencepost agent` sidecar — holds it.
 *
 * release() and complete() take an optional bound (a signal, a timeout) that reaches every request
 * they make, so that a caller cut off from the API server can give up on them and have them
 * aborted on the wire (`fencepost exec` bounds them by what is left of the lease after a loss).
 */
import { requestRun } from '../agent/run-once.ts';
import { claimSession, SessionClaimedError } from '../agent/session-claim.ts';
import { bounded, waitBounded, type RequestBounds } from './bounds.ts';
import { HandingOverError, LockHeldError, NotAcquiredError, SessionInUseError } from './errors.ts';
import { podIdentity } from './identity.ts';
import { heldElsewhere, semaphorePermits, type HeldElsewhere } from '../agent/held-elsewhere.ts';
import type { IfHeld } from './if-held.ts';
import { acquireSet, type HeldLockSet, type SetScope } from './lock-set.ts';
import { acquireFromStore, type StoreConnection } from './store-acquire.ts';
import { LockSession, type HandoverNotice, type LockEvent } from '../agent/session.ts';
import { silentLogger, type Logger } from '../observability/logger.ts';
import type { TermTimings } from '../protocol/timings.ts';
import { realClock, type TimerClock } from '../runtime/clock.ts';
import { connect, type KubeconfigSource } from '../transport/connect.ts';

/** AcquireOptions; every field is optional. */
export interface AcquireOptions {
  /**
   * kubeconfig: a kubeconfig file path, or a @kubernetes/client-node `KubeConfig` (anything with
   * `exportConfig()`: it is read once, through its exported document), or the transport's
   * ApiClient. Default: $KUBECONFIG, else ~/.kube/config, else the pod's ServiceAccount
   * (transport/load-config.ts). Exec credential plugins give tokens only; auth-provider entries
   * and proxies are refused.
   */
  readonly kubeconfig?: KubeconfigSource;
  /** namespace of the lock; default $POD_NAMESPACE. */
  readonly namespace?: string;
  /** pod: this pod incarnation; default $POD_NAME and $POD_UID. */
  readonly pod?: { readonly name: string; readonly uid: string };
  /** waitMs: give up after this long (NotAcquiredError); default: wait until signal aborts. */
  readonly waitMs?: number;
  /** signal: abandons the wait. */
  readonly signal?: AbortSignal;
  /**
   * runId (Mutex mode, run-once-per-window): the run this acquire is for, e.g. a cron slot. If a
   * holder already reported it completed (before the request, or while this pod waited), acquire
   * throws AlreadyDoneError instead of granting (agent/run-once.ts, shared with the agent's API).
   */
  readonly runId?: string;
  /**
   * ifHeld: what to do when another pod holds the lock (see client/if-held.ts for what "holds"
   * means). `wait` (the default): ask and wait, bounded by waitMs (Mutex: join the queue). `fail`:
   * throw LockHeldError at once if the Lease names another holder when acquire looks, having
   * requested nothing; and if another pod is granted the lock while this one waits for its own
   * grant, withdraw the request and throw LockHeldError. For a set of locks it applies to each.
   */
  readonly ifHeld?: IfHeld;
  /**
   * program names what runs this session, for the error a second session of the pod gets
   * (SessionInUseError); default `acquire()`.
   */
  readonly program?: string;
  /**
   * store: hold the lock in a Redis or Redlock store instead of on a Kubernetes Lease, for apps
   * outside a cluster (docs/stores.md): `redis://[[user]:password@]host[:port][/db]` (rediss://
   * for TLS), `redis+sentinel://h1:p1,h2:p2/master`, `redis+cluster://h1:p1,h2:p2`, or
   * `redlock://h1:p1,h2:p2,…` (at least 3 independent masters, 5 usual). No pod identity,
   * kubeconfig or controller is needed; kubeconfig, pod and runId are refused. The lock is
   * `namespace`/name (namespace default `default`), with its tokens on the same Redis counter key
   * the controller uses. Or a StoreConnection (connectStore(url)) to reuse one connection
   * across acquires; acquire then leaves it open.
   */
  readonly store?: string | StoreConnection;
  /**
   * ttlMs (store locks only): the key's TTL, renewed every third of it while the holder runs;
   * an integer in [300, 86400000], default 15000.
   */
  readonly ttlMs?: number;
  /**
   * floor (store locks only): the lowest token this lock may be issued above, asked before each
   * attempt. Default 0: standalone, there is no high-water mark outside Redis (docs/stores.md,
   * "Tokens when Redis loses its data").
   */
  readonly floor?: (lock: string) => bigint | Promise<bigint>;
  /**
   * minDrainMs (Lease locks): the shortest drain period this app needs when its lock is handed
   * over (docs/agent.md "Planned handover"): a handover asking for less (`--drain 0`) is held this
   * long, so that the app can stop before the release; answer with drained() as soon as it has.
   * Default 0: the handover's own period. A function gets the held term's timings (`fencepost
   * exec` passes its grace, which follows from them, plus a margin).
   */
  readonly minDrainMs?: number | ((timings: TermTimings) => number);
  readonly log?: Logger;
  readonly clock?: TimerClock;
}

export { AlreadyDoneError } from '../agent/run-once.ts';
export { RequestTimeoutError, type RequestBounds } from './bounds.ts';
export { HandingOverError, LockHeldError, NotAcquiredError, SessionInUseError } from './errors.ts';
export type { IfHeld } from './if-held.ts';
export type { HeldLockSet } from './lock-set.ts';

/** HeldLock is a granted lock. Dispose it (or call release) when done. */
export interface HeldLock extends AsyncDisposable {
  readonly lock: string;
  /** token is this term's fencing token. */
  readonly token: bigint;
  /**
   * permit: for a Semaphore lock, the permit this pod holds (0 ≤ permit < spec.permits); undefined
   * for Election and Mutex. Fence a Semaphore per permit: guard key `<lock>/<permit>`, since its N
   * holders write at once with N different tokens (docs/agent.md "Semaphore mode").
   */
  readonly permit: number | undefined;
  /**
   * counterMissing (store locks only): the Redis fencing counter did not exist before this grant,
   * so the token started from the Redis server's clock — a new lock's first grant, or the store lost its data
   * (logged as a warning too; docs/stores.md). Undefined for Lease locks.
   */
  readonly counterMissing?: boolean;
  /**
   * clockFloored (store locks only): the token was floored at the Redis server's clock in
   * microseconds, because another Redis process issued it than the one that issued the last (a
   * new or lost counter, a failover to a replica, a restart, a moved slot): the counter may have
   * been behind tokens already handed out (docs/stores.md "Tokens across failover"). Undefined for
   * Lease locks.
   */
  readonly clockFloored?: boolean;
  /**
   * signal aborts when the lock is lost or released, and when a planned handover of it starts
   * (reason: a HandingOverError; the lock is still held until drained() or the drain's end):
   * stop writing then.
   */
  readonly signal: AbortSignal;
  /** timings: this term's lease duration, renew deadline and renew period. */
  readonly timings: TermTimings;
  /** isHeld checks validity against the clock now (false after a pause past the deadline). */
  isHeld(): boolean;
  /** onEvent subscribes to renewed/lost/released events of this session. */
  onEvent(listener: (e: LockEvent) => void): () => void;
  /**
   * onHandover subscribes to the planned-handover notices of this term (draining: with the
   * successor and the drain period in force; handoverCancelled). Store locks have none.
   */
  onHandover(listener: (e: HandoverNotice) => void): () => void;
  /** draining: the planned handover of this term under way (successor, time left), or undefined. */
  draining(): { readonly to: string; readonly deadlineInMs: number } | undefined;
  /**
   * drained answers a planned handover: the app has stopped, so the lock is released to the
   * successor now instead of at the end of the drain period. Resolves true once released, false
   * (and does nothing) when no handover is under way; `bounds` abort the release request.
   */
  drained(bounds?: RequestBounds): Promise<boolean>;
  /**
   * complete reports this acquire's run id completed (requires options.runId); call before
   * release. `bounds` abort the request (see RequestBounds).
   */
  complete(bounds?: RequestBounds): Promise<void>;
  /**
   * release withdraws the request, gives the lock up (compare-and-swap) and stops the session.
   * Idempotent: the first call's bounds apply to the requests; a later call waits for the same
   * release, and stops waiting (rejects) if its own bounds end first.
   *
   * `bounds` abort the withdrawal and the Lease requests (see RequestBounds). Whatever happens to
   * them, the session stops trusting the term first (signal aborts) and is stopped at the end, so
   * nothing renews the Lease any more: a Lease not released expires on the server after its duration.
   */
  release(bounds?: RequestBounds): Promise<void>;
}

/**
 * acquire waits until the lock is granted to this pod and confirmed, then returns it.
 *
 * Given several locks (`acquire(['a', 'b'])`), it takes all of them or none (client/lock-set.ts):
 * one after another in a global order (by namespace/name, whatever order they were given in), so
 * that two pods asking for overlapping sets cannot deadlock; waitMs bounds the whole set; when one
 * is not granted, those already held are released, in reverse order, before acquire throws.
 * The set's signal aborts when any of its locks is lost. options.runId takes one lock only.
 *
 * With options.store, the lock is held in Redis or on Redlock masters instead (client/store-acquire.ts).
 */
export function acquire(lock: string, opts?: AcquireOptions): Promise<HeldLock>;
export function acquire(locks: readonly string[], opts?: AcquireOptions): Promise<HeldLockSet>;
export function acquire(lock: string | readonly string[], opts: AcquireOptions = {}): Promise<HeldLock | HeldLockSet> {
  const min = opts.minDrainMs;
  if (typeof min === 'number' && !(Number.isFinite(min) && min >= 0))
    return Promise.reject(
      new TypeError(`acquire(${String(lock)}): options.minDrainMs must be a number of ms ≥ 0, got ${min}`),
    );
  const store = opts.store;
  if (store !== undefined) return acquireFromStore(lock, { ...opts, store });
  return typeof lock === 'string' ? acquireOne(lock, opts) : acquireSet(lock, opts, acquireOne, kubeScope(opts));
}

/** kubeScope: a set of Lease locks shares this pod's identity and one API client (closed with the set). */
function kubeScope(opts: AcquireOptions): () => SetScope {
  return () => {
    const { namespace, self } = podIdentity(opts);
    const api = connect(opts.kubeconfig);
    return {
      namespace,
      shared: { kubeconfig: api, namespace, pod: self },
      close: () => {
        if (api !== opts.kubeconfig) api.close();
      },
    };
  };
}

/** acquireOne is acquire() of one lock. */
async function acquireOne(lock: string, opts: AcquireOptions): Promise<HeldLock> {
  const { namespace, self } = podIdentity(opts);
  const clock = opts.clock ?? realClock;
  // After the identity (a missing POD_* is named first), before the claim (nothing to undo).
  const api = connect(opts.kubeconfig);
  // A client made here is closed with the session (its kept-alive connections with it).
  const closeOwn = (): void => {
    if (api !== opts.kubeconfig) api.close();
  };
  // One session per lock per pod: claimed before anything is requested, so a refused session
  // writes nothing (its withdrawal would erase the other session's Mutex request).
  const claim = await claimSession({ namespace, lock, self, program: opts.program ?? 'acquire()' }).catch(
    (err: unknown) => {
      throw err instanceof SessionClaimedError ? new SessionInUseError(lock, err) : err;
    },
  );
  const minDrain = opts.minDrainMs;
  const session = new LockSession({
    api,
    namespace,
    lock,
    self,
    clock,
    log: opts.log ?? silentLogger,
    ...(minDrain !== undefined ? { minDrainMs: typeof minDrain === 'number' ? () => minDrain : minDrain } : {}),
  });
  const lost = new AbortController();
  try {
    await session.start();
  } catch (err) {
    await session.stop();
    await claim.release();
    closeOwn();
    throw err;
  }
  const ifHeld = opts.ifHeld ?? 'wait';
  // A Semaphore is held only when every permit is (client/if-held.ts): how many it has.
  let permits: number | undefined;
  if (ifHeld === 'fail') {
    try {
      permits = await semaphorePermits(api, namespace, lock);
    } catch (err) {
      await session.stop();
      await claim.release();
      closeOwn();
      throw err;
    }
  }
  const heldNow = (): HeldElsewhere | undefined => heldElsewhere(session, permits);
  const lockHeld = (h: HeldElsewhere): LockHeldError => new LockHeldError(lock, h.holder, h.permits);
  // Held when asked: give up before requesting anything, so there is nothing to withdraw.
  const holderNow = ifHeld === 'fail' ? heldNow() : undefined;
  if (holderNow !== undefined) {
    await session.stop();
    await claim.release();
    closeOwn();
    throw lockHeld(holderNow);
  }
  try {
    await requestRun(
      session,
      lock,
      opts.runId,
      () =>
        new Promise<boolean>((resolve, reject) => {
          const finish = (err?: Error): void => {
            off();
            offHolder();
            timer?.cancel();
            opts.signal?.removeEventListener('abort', onAbort);
            if (err !== undefined) reject(err);
            else resolve(true);
          };
          const off = session.onEvent((e) => {
            if (e.type === 'granted') finish();
          });
          // Granted to another pod while this one waited (it was free when asked, or another
          // requester was ahead in the queue): under `fail`, that is the same as held when asked.
          const checkHolder = (): void => {
            const other = ifHeld === 'fail' ? heldNow() : undefined;
            if (other !== undefined) finish(lockHeld(other));
          };
          const offHolder = session.onHolderChange(checkHolder);
          const onAbort = (): void => {
            finish(new NotAcquiredError(`acquire(${lock}): aborted before the lock was granted`));
          };
          opts.signal?.addEventListener('abort', onAbort, { once: true });
          const timer =
            opts.waitMs !== undefined
              ? clock.setTimeout(() => {
                  finish(new NotAcquiredError(`acquire(${lock}): not granted within ${opts.waitMs} ms`));
                }, opts.waitMs)
              : undefined;
          if (session.heldToken() !== undefined) finish();
          else checkHolder();
        }),
    );
  } catch (err) {
    const withdrawal = await session.withdraw().then(
      () => undefined,
      (e: unknown) => ({ err: e }),
    );
    // Granted after all, between the decision and the withdrawal (the other holder released at
    // once): hand the term back now rather than leave it to expire.
    if (session.heldToken() !== undefined) await session.release().catch(() => undefined);
    await session.stop();
    await claim.release();
    closeOwn();
    // A LockHeldError promises that nothing was left behind; a request still on the pod is not that.
    if (err instanceof LockHeldError && withdrawal !== undefined) {
      const why = withdrawal.err instanceof Error ? withdrawal.err.message : String(withdrawal.err);
      throw new Error(`${err.message}, but withdrawing this pod's request failed: ${why}`, { cause: err });
    }
    throw err;
  }
  const token = session.heldToken();
  const timings = session.termTimings();
  if (token === undefined || timings === undefined) {
    await session.stop();
    await claim.release();
    closeOwn();
    throw new NotAcquiredError(`acquire(${lock}): lost before it could be used`);
  }
  session.onEvent((e) => {
    if ((e.type === 'lost' || e.type === 'released') && e.token === token.toString())
      lost.abort(new Error(`lock ${lock} ${e.type}: ${e.reason ?? ''}`));
  });
  // A handover ends the term at the drain's end at the latest: the app stops writing now, while
  // the lock is still held, and answers with drained() (before, the signal waited for the release).
  const onDraining = (n: HandoverNotice): void => {
    if (n.type === 'draining' && n.token === token.toString())
      lost.abort(new HandingOverError(lock, n.to ?? '?', n.drainMs ?? 0));
  };
  session.onHandover(onDraining);
  const drainingNow = session.snapshot().draining;
  if (drainingNow !== undefined)
    onDraining({
      type: 'draining',
      lock,
      token: token.toString(),
      to: drainingNow.to,
      drainMs: drainingNow.deadlineInMs,
    });
  let released: Promise<void> | undefined;
  const release = (bounds?: RequestBounds): Promise<void> => {
    if (released !== undefined) return waitBounded(released, bounds, clock, `release(${lock})`);
    released = bounded(bounds, clock, `release(${lock})`, async (signal) => {
      lost.abort(new Error(`lock ${lock} released`));
      try {
        await session.withdraw({ signal }); // first, so that a Mutex lock is not granted back to us
        await session.release({ signal });
      } finally {
        // Whatever the requests did: nothing renews the Lease any more, and the pod's claim is free.
        await session.stop();
        await claim.release();
        closeOwn();
      }
    });
    return released;
  };
  return {
    lock,
    token,
    permit: session.snapshot().permit,
    timings,
    signal: lost.signal,
    isHeld: () => session.heldToken() === token,
    onEvent: (l) => session.onEvent(l),
    onHandover: (l) =>
      session.onHandover((n) => {
        if (n.token === token.toString()) l(n);
      }),
    draining: () => (session.heldToken() === token ? session.snapshot().draining : undefined),
    drained: async (bounds?: RequestBounds) => {
      let answered = false;
      await bounded(bounds, clock, `drained(${lock})`, async (signal) => {
        if (session.heldToken() !== token) return;
        answered = await session.drained(signal !== undefined ? { signal } : undefined);
      });
      return answered;
    },
    complete: async (bounds?: RequestBounds) => {
      const runId = opts.runId;
      if (runId === undefined) throw new Error(`lock ${lock}: complete() needs options.runId`);
      await bounded(bounds, clock, `complete(${lock})`, (signal) => session.complete(runId, { signal }, token));
    },
    release,
    [Symbol.asyncDispose]: () => release(),
  };
}
