/**
 * The dashboard's watches: four supervised informers (runtime/informer.ts) over the user's
 * kubeconfig — DistributedLocks, the Leases labelled with a lock, the Events about locks, and the
 * agents' `LockLost` Events on their pods — each folding into the {@link DashboardModel} and
 * telling `onChange` which lock changed. Read-only: list and watch, nothing else.
 *
 * Only the locks must be readable: without them there is nothing to show, so `start` waits for
 * their first list (and rejects, naming the failure, when it never comes). Leases and Events are
 * best effort: a user who may not list them still sees the locks, from their status, and the
 * informers keep retrying with backoff in the background.
 */
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type CoreV1Event,
  type KubernetesListObject,
  type KubernetesObject,
  type V1Lease,
} from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION, type DistributedLock } from '../api/v1alpha1/distributedlock.ts';
import { EventReason } from '../api/v1alpha1/conditions.ts';
import { typedApi, type ApiClient } from '../kube/typed-api.ts';
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

/** page passes the informer's paging to a client-node list call. */
const page = (p: { readonly limit: number; readonly continue: string | undefined }) => ({
  limit: p.limit,
  ...(p.continue !== undefined ? { _continue: p.continue } : {}),
});

/**
 * startSources starts the informers and resolves once the locks are listed.
 *
 * @throws the lock informer's failure when the locks cannot be listed within the sync timeout
 * (e.g. the CRD is not installed, or the user may not list DistributedLocks); every informer is
 * stopped then.
 */
export async function startSources(o: SourcesOptions): Promise<Sources> {
  const { api, namespace: ns, model, onChange } = o;
  const custom = typedApi(api, CustomObjectsApi);
  const coordination = typedApi(api, CoordinationV1Api);
  const core = typedApi(api, CoreV1Api);
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

  const listLocks = async (p?: Parameters<typeof page>[0]) =>
    (ns !== undefined
      ? await custom.listNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: ns,
          plural: PLURAL,
          ...(p ? page(p) : {}),
        })
      : await custom.listClusterCustomObject({
          group: GROUP,
          version: VERSION,
          plural: PLURAL,
          ...(p ? page(p) : {}),
        })) as KubernetesListObject<DistributedLock>;
  const locks = superviseInformer<DistributedLock>({
    ...common,
    name: 'distributedlocks',
    path:
      ns !== undefined ? `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${PLURAL}` : `/apis/${GROUP}/${VERSION}/${PLURAL}`,
    list: () => listLocks(),
    listPage: (p) => listLocks(p),
    transform: slim,
  });
  locks.onChange(fold((l: DistributedLock, c) => model.applyLock(l, c)));

  const listLeases = (p?: Parameters<typeof page>[0]) => {
    const q = { labelSelector: LOCK_LABEL, ...(p ? page(p) : {}) };
    return ns !== undefined
      ? coordination.listNamespacedLease({ namespace: ns, ...q })
      : coordination.listLeaseForAllNamespaces(q);
  };
  const leases = superviseInformer<V1Lease>({
    ...common,
    name: 'leases',
    labelSelector: LOCK_LABEL,
    path:
      ns !== undefined ? `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases` : '/apis/coordination.k8s.io/v1/leases',
    list: () => listLeases(),
    listPage: (p) => listLeases(p),
    transform: slim,
  });
  leases.onChange(fold((l: V1Lease, c) => model.applyLease(l, c)));

  // Events by field selector: the informer takes no field selector of its own, so it goes in the
  // path, whose query the informer's watch merges with its own.
  const eventInformer = (name: string, fieldSelector: string): SupervisedInformer<CoreV1Event> => {
    const list = (p?: Parameters<typeof page>[0]) => {
      const q = { fieldSelector, ...(p ? page(p) : {}) };
      return ns !== undefined ? core.listNamespacedEvent({ namespace: ns, ...q }) : core.listEventForAllNamespaces(q);
    };
    const base = ns !== undefined ? `/api/v1/namespaces/${ns}/events` : '/api/v1/events';
    const informer = superviseInformer<CoreV1Event>({
      ...common,
      name,
      path: `${base}?fieldSelector=${encodeURIComponent(fieldSelector)}`,
      list: () => list(),
      listPage: (p) => list(p),
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
