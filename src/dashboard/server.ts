/**
 * The dashboard's HTTP server: the page, a JSON snapshot, and live updates over Server-Sent
 * Events. Read-only by construction: it answers GET and HEAD only (405 otherwise) and its only
 * way to the cluster is the model the watches fill and the {@link RawReader} it is given.
 *
 * Routes:
 * - `GET /` — the page (the list; `?lock=NS/NAME` one lock); `/assets/…` its stylesheet and modules.
 * - `GET /api/locks` — {@link Snapshot}; `GET /api/locks/NS/NAME` — {@link LockDetail} (404 if unknown).
 * - `GET /events` — SSE: a `snapshot` event, then `delta` events with only the locks that changed.
 * - `GET /events?lock=NS/NAME` — SSE: `detail` events, the lock and its timeline, on each change.
 * - `GET /api/raw/{pods,leases,events}/NS/NAME` — the object as the API server has it (events: the
 *   lock's Events), for the page's links to the holder pod, the Lease and the Events. Only objects
 *   of a lock the model shows: its Lease and permit Leases, its Events, the pods its state names
 *   (holders, queued requests) and the candidate pods that carry its keys (a Mutex request, the
 *   holder marks); anything else is 404, as if it did not exist — the dashboard's credentials
 *   may read every pod, and the raw views must not pass that on.
 *
 * Changes are pushed at most every `flushMs` (default 100 ms), each lock once however often it
 * changed in between, and each delta is serialized once for every client. A client that does not
 * read (more than {@link MAX_BUFFERED} bytes waiting) is disconnected; its EventSource reconnects
 * and starts again from a snapshot.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { podKeys } from '../protocol/names.ts';
import type { Asset } from './static-files.ts';
import type { DashboardModel } from './model.ts';
import { PageServer, sendAsset, sendJson, sendText, sseFrame } from './page-server.ts';
import type { Delta, DetailEvent, Snapshot } from './wire.ts';

/** RawKind: the objects the page links to. */
export type RawKind = 'pods' | 'leases' | 'events';

/** RawReader reads one object (for events: the lock's Events) from the API server; undefined when not found. */
export type RawReader = (kind: RawKind, namespace: string, name: string) => Promise<unknown>;

/** DashboardServerOptions configures {@link DashboardServer}. */
export interface DashboardServerOptions {
  readonly model: DashboardModel;
  readonly assets: ReadonlyMap<string, Asset>;
  /** synced: whether every watch has listed once (shown on the page). */
  readonly synced: () => boolean;
  readonly raw: RawReader;
  readonly host: string;
  /** port: 0 picks a free one. */
  readonly port: number;
  /** flushMs: the longest a change waits before it is pushed. Defaults to 100. */
  readonly flushMs?: number;
  /** heartbeatMs: an SSE comment this often keeps proxies and the browser from timing out. Defaults to 15 s. */
  readonly heartbeatMs?: number;
  /** onError is told about failures that only one response sees (a raw read that failed). */
  readonly onError?: (err: unknown, path: string) => void;
}

/** MAX_BUFFERED: bytes an SSE client may leave unread before it is dropped (it reconnects from a snapshot). */
export const MAX_BUFFERED = 8 * 1024 * 1024;

const NAME = '[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?';
const LOCK_PATH = new RegExp(`^/api/locks/(${NAME})/(${NAME})$`);
const RAW_PATH = new RegExp(`^/api/raw/(pods|leases|events)/(${NAME})/(${NAME})$`);
const LOCK_KEY = new RegExp(`^(${NAME})/(${NAME})$`);

/** DashboardServer: see the module comment. */
export class DashboardServer {
  readonly #o: DashboardServerOptions;
  readonly #page: PageServer;
  readonly #list = new Set<ServerResponse>();
  readonly #detail = new Map<ServerResponse, string>();
  readonly #pending = new Set<string>();
  #flushTimer: NodeJS.Timeout | undefined;

  constructor(o: DashboardServerOptions) {
    this.#o = o;
    this.#page = new PageServer({
      host: o.host,
      port: o.port,
      ...(o.heartbeatMs !== undefined ? { heartbeatMs: o.heartbeatMs } : {}),
      maxBuffered: MAX_BUFFERED,
      misdirected: (res) => {
        sendText(res, 421, 'This dashboard answers only to a loopback name (127.0.0.1, localhost, [::1]).\n');
      },
      handle: (req, res) => {
        this.#handle(req, res);
      },
    });
  }

  /** start listens; resolves with the address bound. */
  start(): Promise<AddressInfo> {
    return this.#page.start();
  }

  /** changed marks a lock as changed; it is pushed with the next flush. Synchronous and cheap. */
  changed(key: string): void {
    this.#pending.add(key);
    if (this.#flushTimer === undefined)
      this.#flushTimer = setTimeout(() => {
        this.#flushTimer = undefined;
        this.#flush();
      }, this.#o.flushMs ?? 100);
  }

  /** clients: how many SSE streams are open. */
  clients(): number {
    return this.#page.streams();
  }

  /** close ends every stream and stops listening. */
  async close(): Promise<void> {
    clearTimeout(this.#flushTimer);
    this.#list.clear();
    this.#detail.clear();
    await this.#page.close();
  }

  #flush(): void {
    const keys = [...this.#pending];
    this.#pending.clear();
    if (this.#list.size > 0) {
      const upsert = [];
      const remove = [];
      for (const k of keys) {
        const v = this.#o.model.view(k);
        if (v !== undefined) upsert.push(v);
        else remove.push(k);
      }
      const delta: Delta = { now: new Date().toISOString(), upsert, remove };
      const frame = sseFrame('delta', delta);
      for (const res of [...this.#list]) this.#page.send(res, frame);
    }
    if (this.#detail.size > 0) {
      const changed = new Set(keys);
      for (const [res, key] of this.#detail) if (changed.has(key)) this.#page.send(res, this.#detailFrame(key));
    }
  }

  #detailFrame(key: string): string {
    const e: DetailEvent = { now: new Date().toISOString(), detail: this.#o.model.detail(key) ?? null };
    return sseFrame('detail', e);
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      sendText(res, 405, 'The dashboard is read-only: GET and HEAD only.\n');
      return;
    }
    const url = new URL(req.url ?? '/', 'http://dashboard.invalid');
    const path = url.pathname;
    const asset = this.#o.assets.get(path);
    if (asset !== undefined) {
      sendAsset(req, res, asset);
      return;
    }
    if (path === '/api/locks') {
      sendJson(res, 200, this.#snapshot());
      return;
    }
    const lock = LOCK_PATH.exec(path);
    if (lock !== null) {
      const d = this.#o.model.detail(`${lock[1] ?? ''}/${lock[2] ?? ''}`);
      if (d === undefined) sendJson(res, 404, { message: 'no such lock (or not visible to this kubeconfig)' });
      else sendJson(res, 200, d);
      return;
    }
    if (path === '/events') {
      this.#events(req, res, url.searchParams.get('lock'));
      return;
    }
    const raw = RAW_PATH.exec(path);
    if (raw !== null) {
      void this.#raw(res, path, raw[1] as RawKind, raw[2] ?? '', raw[3] ?? '');
      return;
    }
    sendText(res, 404, 'Not found.\n');
  }

  #snapshot(): Snapshot {
    return { now: new Date().toISOString(), synced: this.#o.synced(), locks: this.#o.model.views() };
  }

  #events(req: IncomingMessage, res: ServerResponse, lock: string | null): void {
    if (lock !== null && !LOCK_KEY.test(lock)) {
      sendText(res, 400, 'lock must be NAMESPACE/NAME.\n');
      return;
    }
    const first = lock === null ? sseFrame('snapshot', this.#snapshot()) : this.#detailFrame(lock);
    const forget = () => {
      this.#list.delete(res);
      this.#detail.delete(res);
    };
    if (!this.#page.openStream(req, res, first, forget)) return;
    if (lock === null) this.#list.add(res);
    else this.#detail.set(res, lock);
  }

  async #raw(res: ServerResponse, path: string, kind: RawKind, namespace: string, name: string): Promise<void> {
    const notFound = (): void => {
      sendJson(res, 404, {
        message: `${kind} ${namespace}/${name} not found among the objects of the locks (a lock's Lease, Events, holder and candidate pods)`,
      });
    };
    const scope = this.#o.model.rawScope(namespace);
    const named =
      kind === 'events' ? scope.locks.has(name) : kind === 'leases' ? scope.leases.has(name) : scope.pods.has(name);
    if (!named && (kind !== 'pods' || scope.locks.size === 0)) {
      notFound();
      return;
    }
    try {
      const obj = await this.#o.raw(kind, namespace, name);
      if (obj === undefined || (!named && !carriesLockKeys(obj, scope.locks))) notFound();
      else sendJson(res, 200, obj);
    } catch (err) {
      this.#o.onError?.(err, path);
      sendJson(res, 502, { message: `reading ${kind} ${namespace}/${name} failed: ${String(err)}` });
    }
  }
}

/**
 * carriesLockKeys: the pod carries one of the locks' keys — a Mutex request its agent made, or the
 * holder marks the controller put on it: a candidate that asked, or a holder the model has not
 * seen yet. Read from the pod itself (with `get`, the only pod verb the dashboard has), not from
 * the lock's selector, which would need a second selector evaluator or `list` on every pod.
 */
function carriesLockKeys(obj: unknown, locks: ReadonlySet<string>): boolean {
  const meta = (obj as { metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> } })
    .metadata;
  for (const lock of locks) {
    const k = podKeys(lock);
    if (meta?.annotations?.[k.request] !== undefined || meta?.annotations?.[k.token] !== undefined) return true;
    if (meta?.labels?.[k.holder] !== undefined) return true;
  }
  return false;
}
