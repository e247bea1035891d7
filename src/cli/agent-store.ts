/**
 * openAgentStore — which of the agent's locks are held in a Redis or Redlock store, and the store
 * itself: the agent reads each lock's DistributedLock once at start (spec.store cannot change on a
 * lock: the CRD refuses it), and opens --store-url when any is a store lock. Errors are usage
 * errors naming the flag and the lock (exit 2; the kubelet restarts the sidecar):
 * a store lock without --store-url, or a URL of the other kind.
 *
 * A lock whose DistributedLock cannot be read (not created yet, no RBAC to get it, the API server
 * down) is a Lease lock, as before spec.store existed: the agent then follows its Lease.
 */
import { GROUP, PLURAL, VERSION, storeOf, type DistributedLock } from '../api/v1alpha1/distributedlock.ts';
import { loadStores } from '../client/store-loader.ts';
import type { AgentConfig } from '../config/agent.ts';
import { UsageError } from '../config/usage-error.ts';
import type { Logger } from '../observability/logger.ts';
import { DEFAULT_LEASE_DURATION_SECONDS } from '../protocol/timings.ts';
import { realClock } from '../runtime/clock.ts';
import type { holdLock } from '../stores/hold.ts';
import type { LockStore } from '../stores/store.ts';
import type { ApiClient } from '../transport/client.ts';
import { getCustomObject } from '../transport/resources.ts';

/** StoreLockConfig is what a store lock's session needs from its DistributedLock. */
export interface StoreLockConfig {
  readonly kind: 'Redis' | 'Redlock';
  readonly mode: 'Election' | 'Mutex';
  /** ttlMs: spec.leaseDurationSeconds, the store key's TTL. */
  readonly ttlMs: number;
}

/** AgentStore: the store locks by name, and the open store with its holdLock (none when no lock is a store lock). */
export interface AgentStore {
  readonly locks: ReadonlyMap<string, StoreLockConfig>;
  readonly open?: { readonly store: LockStore; readonly holdLock: typeof holdLock };
}

/** READ_TIMEOUT_MS bounds each read of a DistributedLock at start. */
const READ_TIMEOUT_MS = 10_000;

export async function openAgentStore(api: ApiClient, cfg: AgentConfig, log: Logger): Promise<AgentStore> {
  const locks = new Map<string, StoreLockConfig>();
  for (const lock of cfg.locks) {
    let obj: DistributedLock | undefined;
    try {
      obj = await getCustomObject<DistributedLock>(
        api,
        { group: GROUP, version: VERSION, plural: PLURAL },
        cfg.podNamespace,
        lock,
        { signal: AbortSignal.timeout(READ_TIMEOUT_MS) },
      );
    } catch (err) {
      log.warn({ lock, err }, 'Could not read the DistributedLock; following its Lease');
      continue;
    }
    if (obj === undefined) continue;
    const kind = storeOf(obj.spec);
    if (kind === 'Lease') continue;
    locks.set(lock, {
      kind,
      mode: obj.spec.mode === 'Mutex' ? 'Mutex' : 'Election',
      ttlMs: (obj.spec.leaseDurationSeconds ?? DEFAULT_LEASE_DURATION_SECONDS) * 1000,
    });
  }
  if (locks.size === 0) return { locks };
  const [first, conf] = [...locks][0] ?? [];
  if (cfg.storeUrl === undefined)
    throw new UsageError(
      '--store-url',
      `lock ${first ?? ''} has spec.store ${conf?.kind ?? ''}: give the agent the store's URL (--store-url or FENCEPOST_STORE_URL)`,
    );
  const stores = await loadStores('--store-url');
  const store = await stores.openStore(cfg.storeUrl, '--store-url', realClock);
  for (const [lock, c] of locks)
    if ((c.kind === 'Redis') !== (store.kind === 'redis')) {
      await store.close();
      throw new UsageError(
        '--store-url',
        `lock ${lock} has spec.store ${c.kind}, but ${store.display} is a ${store.kind === 'redis' ? 'Redis' : 'Redlock'} URL`,
      );
    }
  log.info({ store: store.display, locks: [...locks.keys()] }, 'Holding store locks in their store');
  return { locks, open: { store, holdLock: stores.holdLock } };
}
