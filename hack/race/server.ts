/**
 * The race page's HTTP server: the page and its files, the events over Server-Sent Events, and
 * the actions. Listening, the security headers, the Content-Security-Policy, the Host check and
 * the SSE streams are the dashboard's ({@link PageServer}, src/dashboard/page-server.ts); actions
 * also need this page's Origin (requests.ts).
 *
 * Routes:
 * - `GET /`, `/assets/…` — the page, its stylesheet and modules.
 * - `GET /events` — SSE: a `hello` ({@link Hello}: the testbed and every event so far), then one
 *   `race` event per {@link RaceEvent}.
 * - `GET /api/state` — the same hello as JSON (the browser test reads the Redis URL there).
 * - `POST /api/race`, `/api/guard` `{"on":bool}`, `/api/freeze` `{"seconds":N}`, `/api/thaw` —
 *   202 with the action's result; 409 when another action runs or the state forbids it; 400 on a
 *   malformed body; 403 from another origin.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Asset } from '../../src/dashboard/static-files.ts';
import { PageServer, sendAsset, sendJson, sseFrame } from '../../src/dashboard/page-server.ts';
import type { Hello, RaceEvent, RaceInfo } from './events.ts';
import { MAX_BODY, isJson, parseAction, sameOrigin, type Action } from './requests.ts';

/** ActionError carries the HTTP status an action's failure maps to. */
export class ActionError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'ActionError';
    this.status = status;
  }
}

/** RaceServerOptions configures {@link RaceServer}. */
export interface RaceServerOptions {
  readonly assets: ReadonlyMap<string, Asset>;
  readonly info: RaceInfo;
  /** act performs an action; it throws ActionError for a 4xx. */
  readonly act: (a: Action) => Promise<unknown>;
  readonly host: string;
  /** port: 0 picks a free one. */
  readonly port: number;
}

/** MAX_LOG: events kept for pages that connect later (renewals are kept apart: only the last counts). */
export const MAX_LOG = 5000;

/** RaceServer: see the module comment. */
export class RaceServer {
  readonly #o: RaceServerOptions;
  readonly #page: PageServer;
  readonly #log: RaceEvent[] = [];
  #lastLease: RaceEvent | undefined;

  constructor(o: RaceServerOptions) {
    this.#o = o;
    this.#page = new PageServer({
      host: o.host,
      port: o.port,
      misdirected: (res) => {
        sendJson(res, 421, { message: 'This page answers only to a loopback name (127.0.0.1, localhost, [::1]).' });
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

  /** publish records an event and sends it to every page. */
  publish(e: RaceEvent): void {
    if (e.type === 'lease') this.#lastLease = e;
    else {
      this.#log.push(e);
      if (this.#log.length > MAX_LOG) this.#log.splice(0, this.#log.length - MAX_LOG);
    }
    this.#page.broadcast(sseFrame('race', e));
  }

  /** close ends every stream and stops listening. */
  close(): Promise<void> {
    return this.#page.close();
  }

  #hello(): Hello {
    const events = this.#lastLease !== undefined ? [...this.#log, this.#lastLease] : [...this.#log];
    return { now: Date.now(), info: this.#o.info, events };
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const path = new URL(req.url ?? '/', 'http://race.invalid').pathname;
    if (req.method === 'POST') {
      void this.#action(req, res, path);
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD, POST');
      sendJson(res, 405, { message: 'GET, HEAD and POST only.' });
      return;
    }
    const asset = this.#o.assets.get(path);
    if (asset !== undefined) sendAsset(req, res, asset);
    else if (path === '/events') this.#events(req, res);
    else if (path === '/api/state') sendJson(res, 200, this.#hello());
    else sendJson(res, 404, { message: 'Not found.' });
  }

  #events(req: IncomingMessage, res: ServerResponse): void {
    this.#page.openStream(req, res, sseFrame('hello', this.#hello()));
  }

  async #action(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    if (!sameOrigin(req.headers.origin, req.headers.host)) {
      sendJson(res, 403, { message: 'Actions are accepted from this page only.' });
      return;
    }
    if (!isJson(req.headers['content-type'])) {
      sendJson(res, 415, { message: 'Send application/json.' });
      return;
    }
    let body: string;
    try {
      body = await readBody(req);
    } catch (err) {
      sendJson(res, 413, { message: err instanceof Error ? err.message : String(err) });
      return;
    }
    const action = parseAction(path, body);
    if (action === undefined) {
      sendJson(res, 404, { message: 'No such action.' });
      return;
    }
    if ('error' in action) {
      sendJson(res, 400, { message: action.error });
      return;
    }
    try {
      sendJson(res, 202, { ok: true, result: (await this.#o.act(action)) ?? null });
    } catch (err) {
      const status = err instanceof ActionError ? err.status : 500;
      sendJson(res, status, { message: err instanceof Error ? err.message : String(err) });
    }
  }
}

/** readBody reads a request body of at most MAX_BODY bytes. */
function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      body += c;
      if (body.length > MAX_BODY) {
        reject(new Error(`The body is larger than ${MAX_BODY} bytes.`));
        req.destroy();
      }
    });
    req.on('end', () => {
      resolve(body);
    });
    req.on('error', reject);
  });
}
