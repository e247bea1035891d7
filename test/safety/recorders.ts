/**
 * Recorders of the two authoritative sources, independent of the processes under test:
 * - LeaseRecorder: a watch on the namespace's lock Leases (the etcd order, by resourceVersion);
 *   a dropped watch resumes from the last resourceVersion, and `snapshot` adds a fresh GET.
 * - StoreRecorder: the store's own command log (Redis MONITOR), which lists every command in
 *   execution order, including the SETs a Lua script runs — so a write the guard applied shows up
 *   here whatever the client later reported, and a write it refused does not.
 * Both stamp arrival times with the runner's monotonic clock.
 */
import { CoordinationV1Api, Watch, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import type { Redis } from 'ioredis';
import { openMonitor, type RedisMonitor } from '../support/testbed/redis-monitor.ts';
import { parseStoreValue, type LeaseVersion, type StoreApply } from './history.ts';
import { LOCK_LABEL, RELEASE_ANNOTATION, TOKEN_ANNOTATION, leaseName } from '../../src/protocol/names.ts';
import { HANDOVER_MARK_ANNOTATION } from '../../src/protocol/handover.ts';

function toVersion(lease: V1Lease, at: number): LeaseVersion | undefined {
  const rv = lease.metadata?.resourceVersion;
  if (rv === undefined || !/^[0-9]+$/.test(rv)) return undefined;
  const ann = lease.metadata?.annotations ?? {};
  const token = ann[TOKEN_ANNOTATION];
  const renew = lease.spec?.renewTime as unknown;
  return {
    at,
    ...(lease.metadata?.name !== undefined ? { name: lease.metadata.name } : {}),
    resourceVersion: BigInt(rv),
    holder: lease.spec?.holderIdentity ?? undefined,
    // A malformed annotation is recorded as no token: the checker then sees a holder without a token.
    token: token !== undefined && /^(0|[1-9][0-9]{0,18})$/.test(token) ? BigInt(token) : undefined,
    renewTime: renew instanceof Date ? renew.toISOString() : typeof renew === 'string' ? renew : undefined,
    transitions: lease.spec?.leaseTransitions ?? 0,
    release: ann[RELEASE_ANNOTATION],
    ...(ann[HANDOVER_MARK_ANNOTATION] !== undefined ? { handoverMark: ann[HANDOVER_MARK_ANNOTATION] } : {}),
  };
}

/** LeaseRecorder records every version of every lock Lease in one namespace. */
export class LeaseRecorder {
  readonly #kc: KubeConfig;
  readonly #ns: string;
  readonly #byLock = new Map<string, LeaseVersion[]>();
  #rv = '';
  #abort: AbortController | undefined;
  #stopped = false;
  /** restarts: how many times the watch had to be resumed. */
  restarts = 0;
  /**
   * expired: how many times the server refused to resume from the last resourceVersion (410 Gone),
   * so that the recorder relisted and the versions in between are missing: histories incomplete.
   */
  expired = 0;

  constructor(kc: KubeConfig, namespace: string) {
    this.#kc = kc;
    this.#ns = namespace;
  }

  #add(lease: V1Lease): void {
    const lock = lease.metadata?.labels?.[LOCK_LABEL];
    const v = toVersion(lease, performance.now());
    if (lock === undefined || v === undefined) return;
    let list = this.#byLock.get(lock);
    if (list === undefined) {
      list = [];
      this.#byLock.set(lock, list);
    }
    list.push(v);
  }

  /** start lists the Leases and watches from there. */
  async start(): Promise<void> {
    await this.#list();
    await this.#watch();
  }

  async #list(): Promise<void> {
    const list = await this.#kc
      .makeApiClient(CoordinationV1Api)
      .listNamespacedLease({ namespace: this.#ns, labelSelector: LOCK_LABEL });
    for (const l of list.items) this.#add(l);
    this.#rv = list.metadata?.resourceVersion ?? '';
  }

  async #watch(): Promise<void> {
    if (this.#stopped) return;
    const w = new Watch(this.#kc);
    let gone = false;
    // A watch that cannot even start (the API server is down) is retried too, not dropped.
    let resumed = false;
    const again = (): void => {
      if (this.#stopped || resumed) return;
      resumed = true; // the watch may both reject and call done: resume once
      this.restarts++;
      const retry = (): void => {
        setTimeout(() => {
          if (this.#stopped) return;
          void (gone ? this.#list() : Promise.resolve()).then(
            () => this.#watch(),
            () => {
              retry();
            },
          );
        }, 100);
      };
      retry();
    };
    try {
      this.#abort = await w.watch(
        `/apis/coordination.k8s.io/v1/namespaces/${this.#ns}/leases`,
        { labelSelector: LOCK_LABEL, resourceVersion: this.#rv, allowWatchBookmarks: true },
        (type: string, obj: V1Lease) => {
          if (type === 'ERROR') {
            if ((obj as { code?: number }).code === 410) {
              gone = true;
              this.expired++;
            }
            return;
          }
          if (obj.metadata?.resourceVersion !== undefined) this.#rv = obj.metadata.resourceVersion;
          if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') this.#add(obj);
        },
        () => {
          again();
        },
      );
    } catch {
      again();
    }
  }

  /** versions returns what was recorded for a lock so far, after a fresh GET of its Lease. */
  async versions(lock: string): Promise<LeaseVersion[]> {
    try {
      this.#add(
        await this.#kc
          .makeApiClient(CoordinationV1Api)
          .readNamespacedLease({ namespace: this.#ns, name: leaseName(lock) }),
      );
    } catch {
      /* deleted or unreachable: what the watch saw stands */
    }
    return [...(this.#byLock.get(lock) ?? [])];
  }

  stop(): void {
    this.#stopped = true;
    this.#abort?.abort();
  }
}

/**
 * StoreRecorder records, from the store's MONITOR stream, every SET of a trial's write key, and
 * every SET and DEL of a multi-key trial's shared keys (`safety:<trial>:k:<i>`).
 */
export class StoreRecorder {
  readonly #url: string;
  readonly #byTrial = new Map<string, StoreApply[]>();
  #monitor: RedisMonitor | undefined;
  #stopped = false;
  /** broken: the MONITOR connection ended early, so the store log is incomplete from then on. */
  broken = false;
  /** malformed: SETs of write keys whose value is not a storeValue (evidence for the checker). */
  readonly malformed: string[] = [];

  constructor(url: string) {
    this.#url = url;
  }

  async start(): Promise<void> {
    const monitor = await openMonitor(this.#url);
    monitor.on('error', () => undefined);
    // A multi-key DEL names only its key: the guard's script then adds the op's write id (its
    // storeValue) to the lock's write id set, and a script runs alone, so the next ZADD is its own.
    let pendingDel: { trial: string; key: string } | undefined;
    monitor.on('monitor', (_time: string, args: string[]) => {
      const at = performance.now();
      const cmd = (args[0] ?? '').toUpperCase();
      const multi = /^safety:([^:]+):k:(.+)$/.exec(args[1] ?? '');
      if (cmd === 'DEL' && multi !== null) {
        pendingDel = { trial: multi[1] ?? '', key: args[1] ?? '' };
        return;
      }
      if (cmd === 'ZADD' && pendingDel !== undefined) {
        const del = pendingDel;
        pendingDel = undefined;
        const v = parseStoreValue(args[3] ?? '');
        if (v === undefined) this.malformed.push(`DEL ${del.key} with write id ${args[3] ?? ''}`);
        else
          this.#push(del.trial, { at, writeId: v.writeId, token: v.token, writer: v.writer, key: del.key, op: 'del' });
        return;
      }
      if (args.length < 3 || cmd !== 'SET') return;
      const key = args[1] ?? '';
      const m = /^safety:([^:]+):w:(.+)$/.exec(key) ?? multi;
      if (m === null) return;
      const v = parseStoreValue(args[2] ?? '');
      if (v === undefined || (multi === null && v.writeId !== m[2])) {
        this.malformed.push(`${key}=${args[2] ?? ''}`);
        return;
      }
      this.#push(m[1] ?? '', {
        at,
        writeId: v.writeId,
        token: v.token,
        writer: v.writer,
        ...(multi !== null ? { key, op: 'set' as const } : {}),
      });
    });
    this.#monitor = monitor;
    monitor.on('end', () => {
      if (!this.#stopped) this.broken = true;
    });
  }

  #push(trial: string, a: StoreApply): void {
    let list = this.#byTrial.get(trial);
    if (list === undefined) {
      list = [];
      this.#byTrial.set(trial, list);
    }
    list.push(a);
  }

  /** applies returns a trial's applied writes in the store's execution order. */
  applies(trial: string): StoreApply[] {
    return [...(this.#byTrial.get(trial) ?? [])];
  }

  stop(): void {
    this.#stopped = true;
    this.#monitor?.disconnect();
  }
}

/** trialPrefix is a trial's store key prefix (`safety:<trial>:`). */
export function trialPrefix(trial: string): string {
  return `safety:${trial}:`;
}

/** readFinalStore reads every write key of a trial: writeId → value. */
export async function readFinalStore(client: Redis, trial: string): Promise<Map<string, string>> {
  const prefix = `${trialPrefix(trial)}w:`;
  const out = new Map<string, string>();
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) {
      const values = await client.mget(...keys);
      keys.forEach((k, i) => {
        const v = values[i];
        if (v !== null && v !== undefined) out.set(k.slice(prefix.length), v);
      });
    }
  } while (cursor !== '0');
  return out;
}
