/**
 * The agent API's one dispatcher over a route table (http-api.ts holds the table): every request
 * passes the same gates in the same order, whatever its route —
 *   1. who may ask at all (local-only.ts): a loopback Host and no web page, else 403; a POST
 *      carries `Content-Type: application/json` and the body `{}`, else 415 — before the path is
 *      even read, so that reads of lock state are refused too;
 *   2. the target: not a path is 400 `invalid-request`; no route is 404 `no-route`; a route of
 *      another method is 405 `method-not-allowed` with `allow`;
 *   3. the handler; anything it throws is a 500 `internal-error`, logged, and the server goes on:
 *      every container of the pod can reach this server, and no request may take the agent down.
 * Every error is an RFC 9457 problem (problem.ts). Event streams (Server-Sent Events) are opened
 * here too: their head, the keep-alive ping, and their closing when the client goes or the
 * agent stops.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bodyRefusal, browserRefusal, contentTypeRefusal, hostRefusal, MAX_BODY_BYTES } from './local-only.ts';
import { problem, sendProblem } from './problem.ts';

/** PING_MS: an event stream's keep-alive comment, so that idle proxies and clients keep it open. */
const PING_MS = 15_000;

/** RouteCall is one request as a handler sees it: the path's parameters (still percent-encoded) and its query. */
export interface RouteCall {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly url: URL;
  readonly params: Readonly<Record<string, string>>;
  /**
   * openStream answers with an event stream: `first` is written at once, then every chunk
   * `subscribe` passes to its `send`, until the client goes or the agent stops (then the function
   * `subscribe` returned is called).
   */
  readonly openStream: (first: string, subscribe: (send: (chunk: string) => void) => () => void) => void;
}

/** Route: a method, a path pattern whose `{name}` segments are parameters, and its handler. */
export interface Route {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  /** stream: answered with an event stream, which ends only with the client or the agent (not counted as busy). */
  readonly stream?: boolean;
  readonly handle: (call: RouteCall) => void;
}

interface Compiled {
  readonly route: Route;
  readonly pattern: RegExp;
  readonly names: readonly string[];
}

/** Router dispatches requests to the routes of its table. */
export class Router {
  readonly #routes: readonly Compiled[];
  readonly #host: string;
  readonly #log: { error(obj: object, msg: string): void } | undefined;
  readonly #streams = new Set<() => void>();
  #answering = 0;
  #idle: (() => void)[] = [];

  /** `host`: the address the API listens on, which every request's Host must name (local-only.ts). */
  constructor(routes: readonly Route[], o: { host: string; log?: { error(obj: object, msg: string): void } }) {
    this.#routes = routes.map(compile);
    this.#host = o.host;
    this.#log = o.log;
  }

  /** answering: requests other than event streams being answered now. */
  get answering(): number {
    return this.#answering;
  }

  /** whenIdle calls `f` once no request other than an event stream is being answered. */
  whenIdle(f: () => void): void {
    if (this.#answering === 0) f();
    else this.#idle.push(f);
  }

  /** closeStreams ends every open event stream (the agent is stopping). */
  closeStreams(): void {
    for (const close of [...this.#streams]) close();
  }

  /** dispatch is the server's request listener. */
  readonly dispatch = (req: IncomingMessage, res: ServerResponse): void => {
    const found = this.#match(req.method ?? '', (req.url ?? '/').split('?')[0] ?? '');
    if (!('route' in found && found.route.stream === true)) this.#track(res);
    const refused = hostRefusal(req.headers, this.#host) ?? browserRefusal(req.headers);
    if (refused !== undefined) {
      sendProblem(res, refused, { connection: 'close' });
      return;
    }
    if (req.method !== 'POST') {
      this.#run(req, res);
      return;
    }
    const notJson = contentTypeRefusal(req.headers);
    if (notJson !== undefined) {
      sendProblem(res, notJson, { connection: 'close' });
      return;
    }
    let body = '';
    let tooLong = false;
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      if (tooLong) return;
      body += chunk;
      if (body.length > MAX_BODY_BYTES) {
        tooLong = true;
        sendProblem(
          res,
          problem('json-body-required', `the body is longer than ${MAX_BODY_BYTES} bytes; it is {}`, { rule: 'body' }),
          { connection: 'close' },
        );
      }
    });
    req.on('end', () => {
      if (tooLong) return;
      const bad = bodyRefusal(body);
      if (bad !== undefined) sendProblem(res, bad);
      else this.#run(req, res);
    });
  };

  #track(res: ServerResponse): void {
    this.#answering++;
    res.once('close', () => {
      this.#answering--;
      if (this.#answering === 0) for (const f of this.#idle.splice(0)) f();
    });
  }

  #run(req: IncomingMessage, res: ServerResponse): void {
    try {
      this.#route(req, res);
    } catch (err) {
      this.#log?.error({ err, method: req.method, url: req.url?.slice(0, 200) }, 'HTTP handler failed');
      if (!res.headersSent) sendProblem(res, problem('internal-error', 'the request failed; see the agent log'));
      else res.destroy();
    }
  }

  #route(req: IncomingMessage, res: ServerResponse): void {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://agent');
    } catch {
      sendProblem(res, problem('invalid-request', 'the request target is not a path'));
      return;
    }
    const path = url.pathname;
    const method = req.method ?? '';
    const found = this.#match(method, path);
    if ('allow' in found) {
      if (found.allow === undefined) {
        sendProblem(res, problem('no-route', `no endpoint ${path}; the API is described at /openapi.json`));
        return;
      }
      sendProblem(res, problem('method-not-allowed', `${method} is not allowed on ${path}; use ${found.allow}`), {
        allow: found.allow,
      });
      return;
    }
    found.route.handle({
      req,
      res,
      url,
      params: found.params,
      openStream: (first, subscribe) => {
        this.#openStream(req, res, first, subscribe);
      },
    });
  }

  /** #match: the route of `method` on `path` and its parameters, or the methods the path allows (none: no route). */
  #match(
    method: string,
    path: string,
  ): { route: Route; params: Record<string, string> } | { allow: string | undefined } {
    const allowed: string[] = [];
    for (const c of this.#routes) {
      const m = c.pattern.exec(path);
      if (m === null) continue;
      if (c.route.method !== method) {
        allowed.push(c.route.method);
        continue;
      }
      return { route: c.route, params: Object.fromEntries(c.names.map((n, i) => [n, m[i + 1] ?? ''])) };
    }
    return { allow: allowed.length > 0 ? allowed.join(', ') : undefined };
  }

  #openStream(
    req: IncomingMessage,
    res: ServerResponse,
    first: string,
    subscribe: (send: (chunk: string) => void) => () => void,
  ): void {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.write(first);
    const off = subscribe((chunk) => {
      res.write(chunk);
    });
    const ping = setInterval(() => {
      res.write(': ping\n\n');
    }, PING_MS);
    const close = (): void => {
      off();
      clearInterval(ping);
      this.#streams.delete(close);
    };
    this.#streams.add(close);
    req.on('close', close);
  }
}

/** sendJson answers with a JSON body. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
}

/** sendText answers with a plain-text body. */
export function sendText(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' }).end(body);
}

/** messageOf: an error's message, for a problem's detail. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** compile turns `/v1/locks/{name}/events` into a pattern where each parameter is one path segment. */
function compile(route: Route): Compiled {
  const names: string[] = [];
  const source = route.path
    .split('/')
    .map((seg) => {
      const p = /^\{(\w+)\}$/.exec(seg);
      if (p === null) return seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      names.push(p[1] ?? '');
      return '([^/]+)';
    })
    .join('/');
  return { route, pattern: new RegExp(`^${source}$`), names };
}
