/**
 * acquire() with a `store`: the lock is held in Redis or on Redlock masters (stores/), not on a
 * Lease, so nothing of Kubernetes is needed — no pod identity, no kubeconfig, no controller. The
 * HeldLock is the same shape as a Lease lock's: the token, a signal aborted on loss, isHeld()
 * against the validity on the monotonic clock, an idempotent release, renewed/lost/released
 * events. A set of locks goes through the same all-or-nothing logic (client/lock-set.ts) over one
 * store connection.
 */
import type { LockStore } from '../stores/store.ts';
import { isDnsLabel } from '../protocol/names.ts';
import { silentLogger } from '../observability/logger.ts';
import { realClock, type TimerClock } from '../runtime/clock.ts';
import type { AcquireOptions, HeldLock } from './acquire.ts';
import { bounded, waitBounded, type RequestBounds } from './bounds.ts';
import { LockHeldError, NotAcquiredError } from './errors.ts';
import { acquireSet, type HeldLockSet } from './lock-set.ts';
import { loadStores, type StoresModule } from './store-loader.ts';

/** DEFAULT_STORE_NAMESPACE: the namespace of a store lock when options.namespace is not given. */
export const DEFAULT_STORE_NAMESPACE = 'default';

/**
 * StoreLockHeldError: ifHeld `fail`, and another owner held a store lock. A LockHeldError, so that
 * `fencepost exec --if-held skip` knows it; its `holder` is empty: a store's owner id is a random
 * secret per grant (whoever knows it could release the lock), not an identity to report.
 */
export class StoreLockHeldError extends LockHeldError {
  constructor(lock: string, detail: string) {
    super(lock, { name: '', uid: '' });
    this.name = 'StoreLockHeldError';
    this.message = `acquire(${lock}): ${detail}`;
  }
}

/** checkStoreOptions refuses options that only a Lease lock has, and bad names and TTLs; returns the namespace. */
function checkStoreOptions(opts: AcquireOptions, stores: StoresModule): { namespace: string; ttlMs: number } {
  for (const k of ['kubeconfig', 'runId'] as const)
    if (opts[k] !== undefined)
      throw new TypeError(`options.${k}: not for a store lock (options.store is set); it is a Kubernetes Lease option`);
  const namespace = opts.namespace ?? DEFAULT_STORE_NAMESPACE;
  if (!isDnsLabel(namespace))
    throw new TypeError(
      `options.namespace: must be a DNS label (a-z, 0-9, -; at most 63), got ${JSON.stringify(namespace)}`,
    );
  const ttlMs = stores.checkTtl(opts.ttlMs ?? stores.DEFAULT_TTL_MS, 'options.ttlMs');
  return { namespace, ttlMs };
}

function checkLockName(lock: string): void {
  if (!isDnsLabel(lock))
    throw new TypeError(
      `acquire: lock name must be a DNS label (a-z, 0-9, -; at most 63), got ${JSON.stringify(lock)}`,
    );
}

/**
 * StoreConnection is a store opened once (connectStore) for many acquire() calls: pass it as
 * options.store, and each acquire reuses its connections instead of opening its own. The caller
 * closes it when done (acquire never does); locks still held then are lost with it.
 */
export interface StoreConnection {
  /** display: the store's URL with the password redacted. */
  readonly display: string;
  close(): Promise<void>;
  /** store: the opened store (stores/store.ts). */
  readonly store: LockStore;
}

/**
 * connectStore opens a store (the URLs of options.store) for reuse across acquire() calls, as an
 * app that takes a lock again and again should: one connection per process, not one per lock.
 * waitMs bounds the connecting.
 */
export async function connectStore(
  url: string,
  opts: { readonly waitMs?: number; readonly clock?: TimerClock } = {},
): Promise<StoreConnection> {
  const stores = await loadStores('connectStore(url)');
  const store = await stores.openStore(url, 'connectStore(url)', opts.clock ?? realClock, opts.waitMs);
  return { display: store.display, close: () => store.close(), store };
}

/** acquireFromStore is acquire() when options.store is set: one lock, or a set (all or none). */
export async function acquireFromStore(
  lock: string | readonly string[],
  opts: AcquireOptions & { readonly store: string | StoreConnection },
): Promise<HeldLock | HeldLockSet> {
  const stores = await loadStores('options.store');
  const { namespace, ttlMs } = checkStoreOptions(opts, stores);
  for (const name of typeof lock === 'string' ? [lock] : lock) checkLockName(name);
  const clock = opts.clock ?? realClock;
  const startedAt = clock.monotonicMs();
  // A connection the caller opened stays open; one opened here is closed with the lock.
  const url = typeof opts.store === 'string' ? opts.store : undefined;
  const given = typeof opts.store === 'string' ? undefined : opts.store;
  const store = given?.store ?? (await stores.openStore(url ?? '', 'options.store', clock, opts.waitMs));
  const closeOwn = (): Promise<void> => (given !== undefined ? Promise.resolve() : store.close());
  // waitMs bounds the whole acquire, connecting included.
  const waitLeft = opts.waitMs !== undefined ? Math.max(0, opts.waitMs - (clock.monotonicMs() - startedAt)) : undefined;
  if (typeof lock === 'string') {
    try {
      return await holdOne(stores, store, lock, namespace, ttlMs, opts, waitLeft, closeOwn);
    } catch (err) {
      await closeOwn();
      throw err;
    }
  }
  return acquireSet(
    lock,
    opts,
    // The set's bound is counted from the set's start (lock-set.ts); connecting is not in it.
    (name, o) => holdOne(stores, store, name, namespace, ttlMs, o, o.waitMs, () => Promise.resolve()),
    () => ({ namespace, shared: {}, close: () => void closeOwn() }),
  );
}

/** holdOne waits for one store lock and wraps it as a HeldLock; `done` runs after its release. */
async function holdOne(
  stores: StoresModule,
  store: LockStore,
  lock: string,
  namespace: string,
  ttlMs: number,
  opts: AcquireOptions,
  waitMs: number | undefined,
  done: () => Promise<void>,
): Promise<HeldLock> {
  const clock = opts.clock ?? realClock;
  const log = (opts.log ?? silentLogger).child({ lock, store: store.display });
  const floor = opts.floor;
  const r = await stores.holdLock(store.lock(namespace, lock), {
    lock,
    ttlMs,
    clock,
    log,
    signal: opts.signal,
    waitMs,
    ifHeld: opts.ifHeld ?? 'wait',
    floor: floor !== undefined ? () => floor(lock) : () => 0n,
    holderPod: storeHolderPod(opts),
  });
  if (r.kind !== 'held') {
    if (r.kind === 'heldByAnother') throw new StoreLockHeldError(lock, r.reason);
    throw new NotAcquiredError(
      r.kind === 'aborted'
        ? `acquire(${lock}): aborted before the lock was granted (${r.reason})`
        : `acquire(${lock}): not granted within ${opts.waitMs} ms (${r.reason})`,
    );
  }
  const { hold } = r;
  let released: Promise<void> | undefined;
  const release = (bounds?: RequestBounds): Promise<void> => {
    if (released !== undefined) return waitBounded(released, bounds, clock, `release(${lock})`);
    const own = hold.release().finally(done);
    released = bounded(bounds, clock, `release(${lock})`, () => own);
    return released;
  };
  return {
    lock,
    token: hold.token,
    permit: undefined,
    counterMissing: hold.counterMissing,
    clockFloored: hold.clockFloored,
    timings: hold.timings,
    signal: hold.signal,
    isHeld: () => hold.isHeld(),
    onEvent: (l) => hold.onEvent(l),
    // No planned handover moves a store lock: nothing to drain for.
    onHandover: () => () => undefined,
    draining: () => undefined,
    drained: () => Promise.resolve(false),
    complete: () => Promise.reject(new Error(`lock ${lock}: complete() needs a Lease lock (options.runId)`)),
    release,
    [Symbol.asyncDispose]: () => release(),
  };
}

/**
 * storeHolderPod: the pod a store lock's owner ids name (stores/owner.ts), so that the controller
 * can show the holder: options.pod, else $POD_NAME and $POD_UID when both are set. Unlike a Lease
 * lock a store lock needs no pod: outside Kubernetes there is none, and the owner id is random only.
 */
function storeHolderPod(opts: AcquireOptions): { readonly name: string; readonly uid: string } | undefined {
  if (opts.pod !== undefined) return opts.pod;
  const name = process.env['POD_NAME'];
  const uid = process.env['POD_UID'];
  return name !== undefined && name !== '' && uid !== undefined && uid !== '' ? { name, uid } : undefined;
}
