/**
 * The race page's HTTP server: the page and its files, the events over Server-Sent Events, and
 * the actions. Security headers, the Content-Security-Policy and the Host check are the
 * dashboard's (src/dashboard/headers.ts); actions also need this page's Origin (requests.ts).
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
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Asset } from '../../src/dashboard/assets.ts';
import { SECURITY_HEADERS, hostAllowed, isLoopbackHost } from '../../src/dashboard/headers.ts';
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
  readonly #server: Server;
  readonly #clients = new Set<ServerResponse>();
  readonly #log: RaceEvent[] = [];
  #lastLease: RaceEvent | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #port = 0;
  #loopback = true;

  constructor(o: RaceServerOptions) {
    this.#o = o;
    this.#server = createServer((req, res) => {
      this.#handle(req, res);
    });
    this.#server.keepAliveTimeout = 5_000;
  }

  /** start listens; resolves with the address bound. */
  async start(): Promise<AddressInfo> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#o.port, this.#o.host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    const address = this.#server.address() as AddressInfo;
    this.#port = address.port;
    this.#loopback = isLoopbackHost(address.address);
    this.#heartbeat = setInterval(() => {
      for (const res of this.#clients) res.write(': keep-alive\n\n');
    }, 15_000);
    this.#heartbeat.unref();
    return address;
  }

  /** publish records an event and sends it to every page. */
  publish(e: RaceEvent): void {
    if (e.type === 'lease') this.#lastLease = e;
    else {
      this.#log.push(e);
      if (this.#log.length > MAX_LOG) this.#log.splice(0, this.#log.length - MAX_LOG);
    }
    const frame = `event: race\ndata: ${JSON.stringify(e)}\n\n`;
    for (const res of this.#clients) res.write(frame);
  }

  /** close ends every stream and stops listening. */
  async close(): Promise<void> {
    clearInterval(this.#heartbeat);
    for (const res of this.#clients) res.end();
    this.#clients.clear();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #hello(): Hello {
    const events = this.#lastLease !== undefined ? [...this.#log, this.#lastLease] : [...this.#log];
    return { now: Date.now(), info: this.#o.info, events };
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) res.setHeader(k, v);
    if (this.#loopback && !hostAllowed(req.headers.host, this.#port)) {
      this.#json(res, 421, { message: 'This page answers only to a loopback name (127.0.0.1, localhost, [::1]).' });
      return;
    }
    const path = new URL(req.url ?? '/', 'http://race.invalid').pathname;
    if (req.method === 'POST') {
      void this.#action(req, res, path);
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD, POST');
      this.#json(res, 405, { message: 'GET, HEAD and POST only.' });
      return;
    }
    const asset = this.#o.assets.get(path);
    if (asset !== undefined) this.#asset(req, res, asset);
    else if (path === '/events') this.#events(req, res);
    else if (path === '/api/state') this.#json(res, 200, this.#hello());
    else this.#json(res, 404, { message: 'Not found.' });
  }

  #events(req: IncomingMessage, res: ServerResponse): void {
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      Connection: 'keep-alive',
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    res.write(`retry: 1000\n\nevent: hello\ndata: ${JSON.stringify(this.#hello())}\n\n`);
    this.#clients.add(res);
    res.on('close', () => {
      this.#clients.delete(res);
    });
  }

  async #action(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    if (!sameOrigin(req.headers.origin, req.headers.host)) {
      this.#json(res, 403, { message: 'Actions are accepted from this page only.' });
      return;
    }
    if (!isJson(req.headers['content-type'])) {
      this.#json(res, 415, { message: 'Send application/json.' });
      return;
    }
    let body: string;
    try {
      body = await readBody(req);
    } catch (err) {
      this.#json(res, 413, { message: err instanceof Error ? err.message : String(err) });
      return;
    }
    const action = parseAction(path, body);
    if (action === undefined) {
      this.#json(res, 404, { message: 'No such action.' });
      return;
    }
    if ('error' in action) {
      this.#json(res, 400, { message: action.error });
      return;
    }
    try {
      this.#json(res, 202, { ok: true, result: (await this.#o.act(action)) ?? null });
    } catch (err) {
      const status = err instanceof ActionError ? err.status : 500;
      this.#json(res, status, { message: err instanceof Error ? err.message : String(err) });
    }
  }

  #asset(req: IncomingMessage, res: ServerResponse, a: Asset): void {
    res.setHeader('ETag', a.etag);
    res.setHeader('Cache-Control', 'no-cache');
    if (req.headers['if-none-match'] === a.etag) {
      res.writeHead(304).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': a.type, 'Content-Length': a.body.length });
    res.end(req.method === 'HEAD' ? undefined : a.body);
  }

  #json(res: ServerResponse, code: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(code, {
      'Content-Type': 'application/json; charset=utf-8',
      'Cache-Control': 'no-store',
      'Content-Length': Buffer.byteLength(text),
    });
    res.end(text);
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
