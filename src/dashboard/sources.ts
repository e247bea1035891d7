/**
 * The dashboard's watches: four supervised informers (runtime/informer.ts) over the user's
 * kubeconfig, listing and watching through the one API client — DistributedLocks, the Leases
 * labelled with a lock, the Events about locks, and the agents' `LockLost` Events on their pods —
 * each folding into the {@link DashboardModel} and
 * telling `onChange` which lock changed. Read-only: list and watch, nothing else.
 *
 * Only the locks must be readable: without them there is nothing to show, so `start` waits for
 * their first list (and rejects, naming the failure, when it never comes). Leases and Events are
 * best effort: a user who may not list them still sees the locks, from their status, and the
 * informers keep retrying with backoff in the background.
 */
import type { CoreV1Event, KubernetesObject, V1Lease } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION, type DistributedLock } from '../api/v1alpha1/distributedlock.ts';
import { EventReason } from '../api/v1alpha1/conditions.ts';
import { listPages, type ApiClient } from '../kube/api-client.ts';
import { LOCK_LABEL } from '../protocol/names.ts';
import type { TimerClock } from '../runtime/clock.ts';
import { superviseInformer, type InformerLogger, type SupervisedInformer } from '../runtime/informer.ts';
import type { Change, DashboardModel } from './model.ts';

/** LOCK_EVENTS selects the Events the controller records on locks. */
const LOCK_EVENTS = 'involvedObject.kind=DistributedLock';
/** LOCK_LOST selects the Events agents record on their own pods when they step down. */
const LOCK_LOST = `reason=${EventReason.LockLost}`;

/** SourcesOptions configures {@link startSources}. */
export interface SourcesOptions {
  /** api: the API client every list and watch goes through. */
  readonly api: ApiClient;
  /** namespace: watch only this one; undefined: every namespace the user may list. */
  readonly namespace: string | undefined;
  readonly model: DashboardModel;
  /** onChange is told the key of every lock that changed; synchronous and cheap (it only marks the key). */
  readonly onChange: (key: string) => void;
  readonly clock: TimerClock;
  readonly log: InformerLogger;
  /** syncTimeoutMs bounds the wait for the first list of locks. Defaults to the informer's (2 minutes). */
  readonly syncTimeoutMs?: number;
}

/** Sources are the running watches. */
export interface Sources {
  /** synced: every informer has delivered its first list. */
  synced(): boolean;
  stop(): Promise<void>;
}

/** slim drops metadata.managedFields, which nothing here reads and which is most of a small object's size. */
function slim<T extends KubernetesObject>(obj: T): T {
  if (obj.metadata?.managedFields === undefined) return obj;
  const { managedFields: _drop, ...metadata } = obj.metadata;
  return { ...obj, metadata };
}

/**
 * startSources starts the informers and resolves once the locks are listed.
 *
 * @throws the lock informer's failure when the locks cannot be listed within the sync timeout
 * (e.g. the CRD is not installed, or the user may not list DistributedLocks); every informer is
 * stopped then.
 */
export async function startSources(o: SourcesOptions): Promise<Sources> {
  const { api, namespace: ns, model, onChange } = o;
  const common = {
    watcher: api,
    clock: o.clock,
    log: o.log,
    ...(o.syncTimeoutMs !== undefined ? { syncTimeoutMs: o.syncTimeoutMs } : {}),
  };
  const fold =
    <T>(apply: (obj: T, change: Change) => string | undefined) =>
    (obj: T, change: Change): void => {
      const key = apply(obj, change);
      if (key !== undefined) onChange(key);
    };

  const locksPath =
    ns !== undefined ? `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${PLURAL}` : `/apis/${GROUP}/${VERSION}/${PLURAL}`;
  const locks = superviseInformer<DistributedLock>({
    ...common,
    name: 'distributedlocks',
    path: locksPath,
    listPage: listPages<DistributedLock>(api, locksPath),
    transform: slim,
  });
  locks.onChange(fold((l: DistributedLock, c) => model.applyLock(l, c)));

  const leasesPath =
    ns !== undefined ? `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases` : '/apis/coordination.k8s.io/v1/leases';
  const leases = superviseInformer<V1Lease>({
    ...common,
    name: 'leases',
    labelSelector: LOCK_LABEL,
    path: leasesPath,
    listPage: listPages<V1Lease>(api, leasesPath, LOCK_LABEL),
    transform: slim,
  });
  leases.onChange(fold((l: V1Lease, c) => model.applyLease(l, c)));

  // Events by field selector: the informer takes no field selector of its own, so it goes in the
  // path, whose query the informer's list and watch send with their own.
  const eventInformer = (name: string, fieldSelector: string): SupervisedInformer<CoreV1Event> => {
    const base = ns !== undefined ? `/api/v1/namespaces/${ns}/events` : '/api/v1/events';
    const path = `${base}?fieldSelector=${encodeURIComponent(fieldSelector)}`;
    const informer = superviseInformer<CoreV1Event>({
      ...common,
      name,
      path,
      listPage: listPages<CoreV1Event>(api, path),
      transform: slim,
    });
    informer.onChange(fold((e: CoreV1Event, c) => model.applyEvent(e, c)));
    return informer;
  };
  const lockEvents = eventInformer('lock-events', LOCK_EVENTS);
  const lockLost = eventInformer('lock-lost-events', LOCK_LOST);

  const all = [locks, leases, lockEvents, lockLost];
  const stop = async (): Promise<void> => {
    await Promise.all(all.map((i) => i.stop()));
  };
  // Best effort: a failure to sync is logged by the informer, which keeps retrying.
  for (const i of [leases, lockEvents, lockLost]) i.start().catch(() => undefined);
  try {
    await locks.start();
  } catch (err) {
    await stop();
    throw err;
  }
  return { synced: () => all.every((i) => i.hasSynced()), stop };
}
