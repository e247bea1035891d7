/**
 * A tiny HTTP server for /metrics, /healthz and /readyz. Addresses are "host:port"; "0" disables
 * the listener, and port 0 picks a free one (tests read it back from `address`). With `tls` it
 * serves HTTPS, and with `authorize` every /metrics request is checked first (metrics-auth.ts):
 * the controller's secure metrics listener.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { parseBindAddress } from '../config/bind-address.ts';
import type { AccessDecision, AccessRequest } from './metrics-auth.ts';
import type { ServingCertificate } from './serving-cert.ts';

/** parseBindAddress: see src/config/bind-address.ts (re-exported for the listeners' callers). */
export { parseBindAddress };

/** ProbeServer is a listening server; stop closes it. */
export interface ProbeServer {
  readonly address: string;
  stop(): Promise<void>;
}

/**
 * MetricsSource renders the /metrics page: prom-client's Registry (the controller) and
 * exposition.ts's TextRegistry (the agent) are both one.
 */
export interface MetricsSource {
  metrics(): Promise<string>;
  readonly contentType: string;
}

/**
 * ServingTls is what an HTTPS listener serves: `certificate` is read at start, and again every
 * `reloadMs` (when given) so that a rotated certificate (a renewed cert-manager Secret, which the
 * kubelet updates in the mounted folder) is served to new connections without a restart. A read
 * that fails keeps the certificate in use and is tried again at the next tick.
 */
export interface ServingTls {
  readonly certificate: () => ServingCertificate;
  readonly reloadMs?: number;
}

/** ProbeRoutes are the checks and the registry a server exposes (each optional). */
export interface ProbeRoutes {
  readonly registry?: MetricsSource;
  readonly healthz?: () => boolean;
  readonly readyz?: () => boolean;
  /** tls: serve HTTPS with this certificate; default plain HTTP. */
  readonly tls?: ServingTls;
  /** authorize: asked before every /metrics answer; anything but 200 is answered with its status. */
  readonly authorize?: (r: AccessRequest) => Promise<AccessDecision>;
}

/** serveProbes listens on addr (or returns undefined for "0"). */
export async function serveProbes(addr: string, flag: string, routes: ProbeRoutes): Promise<ProbeServer | undefined> {
  if (addr === '0') return undefined;
  const { host, port } = parseBindAddress(addr, flag);
  const metrics = (req: IncomingMessage, res: ServerResponse, path: string): void => {
    const registry = routes.registry;
    if (registry === undefined) return;
    const answer = (): void => {
      registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': registry.contentType }).end(text);
        },
        (err: unknown) => {
          res.writeHead(500).end(String(err));
        },
      );
    };
    if (routes.authorize === undefined) {
      answer();
      return;
    }
    routes.authorize({ method: req.method ?? 'GET', path, authorization: req.headers.authorization }).then(
      (d) => {
        if (d.status === 200) answer();
        else
          res
            .writeHead(d.status, {
              'content-type': 'text/plain',
              // RFC 6750: a 401 names the scheme the client should authenticate with.
              ...(d.status === 401 ? { 'www-authenticate': 'Bearer' } : {}),
            })
            .end(`${d.message}\n`);
      },
      (err: unknown) => {
        res.writeHead(500).end(String(err));
      },
    );
  };
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const check = (ok: boolean | undefined): void => {
      if (ok === undefined) {
        res.writeHead(404).end('not found\n');
        return;
      }
      res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ok\n' : 'not ok\n');
    };
    if (path === '/metrics' && routes.registry !== undefined) metrics(req, res, path);
    else if (path === '/healthz') check(routes.healthz?.() ?? true);
    else if (path === '/readyz') check(routes.readyz?.());
    else check(undefined);
  };
  const tls = routes.tls;
  let reload: NodeJS.Timeout | undefined;
  let server: Server;
  if (tls === undefined) server = createServer(handler);
  else {
    let current = tls.certificate();
    const https = createHttpsServer({ cert: current.cert, key: current.key }, handler);
    if (tls.reloadMs !== undefined) {
      reload = setInterval(() => {
        try {
          const next = tls.certificate();
          if (next.cert === current.cert && next.key === current.key) return;
          https.setSecureContext({ cert: next.cert, key: next.key });
          current = next;
        } catch {
          /* mid-rotation or unreadable: keep serving the current one, try again at the next tick */
        }
      }, tls.reloadMs);
      reload.unref();
    }
    server = https;
  }
  await listenOn(server, port, host).catch((err: unknown) => {
    clearInterval(reload);
    throw err;
  });
  const a = server.address();
  const address =
    a !== null && typeof a === 'object' ? `${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}` : addr;
  return {
    address,
    stop: () =>
      new Promise((r) => {
        clearInterval(reload);
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

/**
 * listenOn starts `server` on host:port. A failure is one message the same on Node and on Bun:
 * `listen <code>: <host>:<port>` (`listen EADDRINUSE: 127.0.0.1:8080`) when the error has a
 * system code — Bun's own text for a taken port does not name the code — else the runtime's
 * message; the original error is the cause.
 */
export async function listenOn(server: Server, port: number, host: string | undefined): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      const where = `${host?.includes(':') === true ? `[${host}]` : (host ?? '')}:${port}`;
      reject(typeof err.code === 'string' ? new Error(`listen ${err.code}: ${where}`, { cause: err }) : err);
    });
    server.listen(port, host, resolve);
  });
}
