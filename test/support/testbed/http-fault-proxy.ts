/**
 * A TLS-terminating HTTP proxy for API-level fault tests: clients that trust the testbed CA talk
 * to it as if it were the kube-apiserver (it presents the API server's own serving certificate,
 * which is for 127.0.0.1), and it forwards each request over TLS to the real kube-apiserver (or
 * to a TcpProxy in front of it) as the admin client certificate. Responses are streamed, so
 * watches (long responses) pass through as they come. What the TCP proxy cannot do, because the
 * bytes are encrypted, this one can: act per request.
 *
 * Faults, switchable at run time (each replaces the previous fault of its kind; `heal` ends all):
 * - `latency(delay)`: every new request waits `delay()` ms before it is forwarded.
 * - `errors({ status, count | forMs })`: the next `count` requests, or every request for `forMs`,
 *   are answered 429 (with Retry-After), 500 or 503 and a metav1.Status body, never forwarded.
 * - `conflictWrites({ forMs? })`: every PUT/PATCH is answered 409 Conflict, never forwarded.
 * - `hang()`: requests are taken and never answered; on `heal` those whose client is still
 *   there are forwarded (a request delivered late), the others are dropped.
 * - `watchDelay(delay)`: each event (line) of a `watch=true` response is delivered `delay()` ms
 *   after it arrived, never before the event before it (order preserved). Applies to watches
 *   already open too.
 * - `match`: every fault takes an optional predicate on (method, path) to narrow it.
 *
 * The proxy listens on 127.0.0.1 and forwards to a loopback target only. Identity: every request
 * reaches the API server as the admin (the safety workers and the controller use that identity).
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Agent, createServer, request as httpsRequest } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { KubeConfig } from '@kubernetes/client-node';

/** RequestInfo is what a fault's match predicate sees of a request. */
export interface RequestInfo {
  readonly method: string;
  readonly path: string;
  readonly watch: boolean;
}
export type RequestMatch = (r: RequestInfo) => boolean;

/** ErrorStatus: the HTTP errors the proxy can answer with. */
export type ErrorStatus = 429 | 500 | 503;

/** HttpFaultCounts: what the proxy did, for reports and tests. */
export interface HttpFaultCounts {
  forwarded: number;
  delayed: number;
  errors: number;
  conflicts: number;
  hung: number;
  watchEventsDelayed: number;
}

/** HttpFaultProxy is a running proxy; clients use `url`. */
export interface HttpFaultProxy {
  readonly port: number;
  readonly url: string;
  readonly counts: Readonly<HttpFaultCounts>;
  latency(delay: () => number, match?: RequestMatch): void;
  errors(o: {
    readonly status: ErrorStatus;
    readonly count?: number;
    readonly forMs?: number;
    readonly retryAfterSeconds?: number;
    readonly match?: RequestMatch;
  }): void;
  conflictWrites(o?: { readonly forMs?: number; readonly match?: RequestMatch }): void;
  hang(match?: RequestMatch): void;
  /** watchDelay delays the events of watches that `match` (every watch by default). */
  watchDelay(delay: () => number, match?: RequestMatch): void;
  /** heal ends every fault; hung requests still wanted are forwarded. Queued watch events keep their schedule. */
  heal(): void;
  /** openRequests: requests in flight through the proxy now (watches included). */
  openRequests(): number;
  close(): Promise<void>;
}

/** HttpFaultProxyTls: the files the proxy needs (PEM paths or contents). */
export interface HttpFaultProxyTls {
  /** serverCert/serverKey: what the proxy presents (the API server's serving certificate). */
  readonly serverCert: string;
  readonly serverKey: string;
  /** ca: trusted for the upstream's certificate. */
  readonly ca: string;
  /** clientCert/clientKey: the identity the proxy presents upstream. */
  readonly clientCert: string;
  readonly clientKey: string;
}

export interface HttpFaultProxyOptions {
  readonly targetPort: number;
  /** targetHost must be a loopback address (default 127.0.0.1). */
  readonly targetHost?: string;
  readonly tls: HttpFaultProxyTls;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);
const REASONS: Record<ErrorStatus | 409, string> = {
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  409: 'Conflict',
};

const pem = (x: string): Buffer => (x.includes('-----BEGIN') ? Buffer.from(x) : readFileSync(x));

/** statusBody is a metav1.Status as the API server writes it. */
function statusBody(code: ErrorStatus | 409, message: string): string {
  return JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: REASONS[code],
    code,
  });
}

interface ErrorFault {
  readonly status: ErrorStatus;
  left: number;
  readonly until: number;
  readonly retryAfterSeconds: number;
  readonly match: RequestMatch;
}
interface Held {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly body: Buffer;
}

/** startHttpFaultProxy listens on 127.0.0.1:0 with TLS and forwards to the target over TLS. */
export async function startHttpFaultProxy(o: HttpFaultProxyOptions): Promise<HttpFaultProxy> {
  const host = o.targetHost ?? '127.0.0.1';
  if (!LOOPBACK.has(host)) throw new Error(`http-fault-proxy forwards to loopback only, not ${host}`);
  const ca = pem(o.tls.ca);
  const agent = new Agent({ keepAlive: true, ca, cert: pem(o.tls.clientCert), key: pem(o.tls.clientKey) });
  const counts: HttpFaultCounts = { forwarded: 0, delayed: 0, errors: 0, conflicts: 0, hung: 0, watchEventsDelayed: 0 };
  const all = (): boolean => true;
  let latency: { delay: () => number; match: RequestMatch } | undefined;
  let errorFault: ErrorFault | undefined;
  let conflict: { until: number; match: RequestMatch } | undefined;
  let hangMatch: RequestMatch | undefined;
  let watchDelay: { delay: () => number; match: RequestMatch } | undefined;
  const held = new Set<Held>();
  const open = new Set<ServerResponse>();
  let closed = false;

  const answer = (
    res: ServerResponse,
    code: ErrorStatus | 409,
    message: string,
    headers: Record<string, string> = {},
  ): void => {
    const body = statusBody(code, message);
    res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
    res.end(body);
  };

  /**
   * pipeWatch delivers a watch response line by line (one line is one event), each `watchDelay()`
   * late and never before the line before it: one FIFO queue and one timer per response, so
   * timers of different lengths cannot reorder it.
   */
  const pipeWatch = (up: IncomingMessage, res: ServerResponse, info: RequestInfo): void => {
    let pending = '';
    let lastAt = 0; // when the previous line is (or was) due, on performance.now()
    const queue: { at: number; text: string }[] = [];
    let timer: NodeJS.Timeout | undefined;
    let ended = false;
    const pump = (): void => {
      timer = undefined;
      const now = performance.now();
      while (queue.length > 0 && (queue[0]?.at ?? Infinity) <= now + 1) {
        const q = queue.shift();
        if (q !== undefined && !res.destroyed) res.write(q.text);
      }
      const head = queue[0];
      if (head !== undefined) {
        timer = setTimeout(pump, Math.max(1, head.at - now));
        return;
      }
      if (ended && !res.destroyed) res.end();
    };
    const push = (text: string, d: number): void => {
      const at = Math.max(performance.now() + d, lastAt);
      lastAt = at;
      if (d > 0) counts.watchEventsDelayed++;
      queue.push({ at, text });
      if (timer === undefined) pump();
    };
    res.on('close', () => {
      if (timer !== undefined) clearTimeout(timer);
      queue.length = 0;
    });
    up.setEncoding('utf8');
    up.on('data', (chunk: string) => {
      pending += chunk;
      for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
        push(pending.slice(0, nl + 1), watchDelay?.match(info) === true ? watchDelay.delay() : 0);
        pending = pending.slice(nl + 1);
      }
    });
    up.on('end', () => {
      if (pending !== '') {
        push(pending, 0);
        pending = '';
      }
      ended = true;
      if (timer === undefined) pump();
    });
  };

  const forward = (req: IncomingMessage, res: ServerResponse, body: Buffer, info: RequestInfo): void => {
    if (res.destroyed || (req.destroyed && res.writableEnded)) return;
    counts.forwarded++;
    const headers = { ...req.headers, host: `${host}:${o.targetPort}` };
    // The proxy authenticates as itself; a client's bearer token would override that identity.
    delete headers.authorization;
    delete headers.connection;
    const up = httpsRequest(
      { host, port: o.targetPort, method: req.method ?? 'GET', path: req.url ?? '/', headers, agent },
      (upRes) => {
        if (res.destroyed) {
          upRes.destroy();
          return;
        }
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        res.flushHeaders();
        if (info.watch && (upRes.statusCode ?? 0) < 300) pipeWatch(upRes, res, info);
        else upRes.pipe(res);
      },
    );
    up.on('error', (err) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const msg = `http-fault-proxy: upstream failed: ${err.message}`;
      res.writeHead(502, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(msg) });
      res.end(msg);
    });
    // The client went away (aborted, timed out): so does the upstream request (a watch stops there).
    res.on('close', () => {
      if (!up.destroyed) up.destroy();
    });
    up.end(body);
  };

  const handle = (req: IncomingMessage, res: ServerResponse, body: Buffer): void => {
    const url = new URL(req.url ?? '/', 'https://proxy');
    const method = (req.method ?? 'GET').toUpperCase();
    const info: RequestInfo = {
      method,
      path: url.pathname,
      watch: url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1',
    };
    const now = performance.now();
    if (errorFault !== undefined && (errorFault.left <= 0 || now >= errorFault.until)) errorFault = undefined;
    if (errorFault?.match(info) === true) {
      errorFault.left--;
      counts.errors++;
      const s = errorFault.status;
      answer(
        res,
        s,
        `http-fault-proxy: injected ${s}`,
        s === 429 ? { 'retry-after': String(errorFault.retryAfterSeconds) } : {},
      );
      return;
    }
    if (conflict !== undefined && now >= conflict.until) conflict = undefined;
    if (conflict?.match(info) === true && (method === 'PUT' || method === 'PATCH')) {
      counts.conflicts++;
      answer(
        res,
        409,
        'Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again (http-fault-proxy: injected 409)',
      );
      return;
    }
    if (hangMatch?.(info) === true) {
      counts.hung++;
      const h: Held = { req, res, body };
      held.add(h);
      res.on('close', () => {
        held.delete(h);
      });
      return;
    }
    const d = latency?.match(info) === true ? latency.delay() : 0;
    if (d > 0) {
      counts.delayed++;
      setTimeout(() => {
        forward(req, res, body, info);
      }, d);
      return;
    }
    forward(req, res, body, info);
  };

  const server = createServer({ cert: pem(o.tls.serverCert), key: pem(o.tls.serverKey) }, (req, res) => {
    if (closed) {
      res.destroy();
      return;
    }
    open.add(res);
    res.on('close', () => {
      open.delete(res);
    });
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      parts.push(c);
    });
    req.on('end', () => {
      handle(req, res, Buffer.concat(parts));
    });
    req.on('error', () => {
      res.destroy();
    });
  });
  server.on('tlsClientError', () => undefined);

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  if (addr === null || typeof addr === 'string') {
    server.close();
    throw new Error('http-fault-proxy got no port');
  }
  const port = addr.port;

  return {
    port,
    url: `https://127.0.0.1:${port}`,
    counts,
    latency(delay, match = all) {
      latency = { delay, match };
    },
    errors(e) {
      errorFault = {
        status: e.status,
        left: e.count ?? Infinity,
        until: e.forMs !== undefined ? performance.now() + e.forMs : Infinity,
        retryAfterSeconds: e.retryAfterSeconds ?? 1,
        match: e.match ?? all,
      };
    },
    conflictWrites(c = {}) {
      conflict = { until: c.forMs !== undefined ? performance.now() + c.forMs : Infinity, match: c.match ?? all };
    },
    hang(match = all) {
      hangMatch = match;
    },
    watchDelay(delay, match = all) {
      watchDelay = { delay, match };
    },
    heal() {
      latency = undefined;
      errorFault = undefined;
      conflict = undefined;
      hangMatch = undefined;
      watchDelay = undefined;
      for (const h of [...held]) {
        held.delete(h);
        if (h.res.destroyed || h.req.socket.destroyed) continue;
        const url = new URL(h.req.url ?? '/', 'https://proxy');
        forward(h.req, h.res, h.body, {
          method: (h.req.method ?? 'GET').toUpperCase(),
          path: url.pathname,
          watch: url.searchParams.get('watch') === 'true',
        });
      }
    },
    openRequests: () => open.size,
    async close() {
      closed = true;
      const done = new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
      for (const res of [...open]) res.destroy();
      held.clear();
      server.closeAllConnections();
      agent.destroy();
      await done;
    },
  };
}

/**
 * proxyTargetOf reads an admin kubeconfig of the testbed (control-plane.ts) and returns what a
 * proxy in front of its API server needs: the API server's port, the CA and admin client files
 * it names, and the serving certificate next to the CA (certs.ts keeps them in one folder).
 */
export function proxyTargetOf(kubeconfigPath: string): {
  readonly targetPort: number;
  readonly tls: HttpFaultProxyTls;
} {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  const server = new URL(cluster?.server ?? '');
  if (!LOOPBACK.has(server.hostname)) throw new Error(`no loopback API server in ${kubeconfigPath}`);
  const caFile = cluster?.caFile;
  if (caFile === undefined || user?.certFile === undefined || user.keyFile === undefined)
    throw new Error(`${kubeconfigPath}: expected CA and client certificate files`);
  const pki = dirname(caFile);
  return {
    targetPort: Number(server.port),
    tls: {
      ca: caFile,
      clientCert: user.certFile,
      clientKey: user.keyFile,
      serverCert: join(pki, 'apiserver.crt'),
      serverKey: join(pki, 'apiserver.key'),
    },
  };
}

/** kubeconfigVia returns the kubeconfig text with its API server URL replaced by the proxy's. */
export function kubeconfigVia(kubeconfigPath: string, proxyUrl: string): string {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const server = new URL(kc.getCurrentCluster()?.server ?? '');
  return kc.exportConfig().replace(server.origin, proxyUrl);
}
