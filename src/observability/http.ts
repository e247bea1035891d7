/**
 * A tiny HTTP server for /metrics, /healthz and /readyz. Addresses are "host:port"; "0" disables
 * the listener, and port 0 picks a free one (tests read it back from `address`).
 */
import { createServer, type Server } from 'node:http';
import { parseBindAddress } from '../config/bind-address.ts';

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

/** ProbeRoutes are the checks and the registry a server exposes (each optional). */
export interface ProbeRoutes {
  readonly registry?: MetricsSource;
  readonly healthz?: () => boolean;
  readonly readyz?: () => boolean;
}

/** serveProbes listens on addr (or returns undefined for "0"). */
export async function serveProbes(addr: string, flag: string, routes: ProbeRoutes): Promise<ProbeServer | undefined> {
  if (addr === '0') return undefined;
  const { host, port } = parseBindAddress(addr, flag);
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const check = (ok: boolean | undefined): void => {
      if (ok === undefined) {
        res.writeHead(404).end('not found\n');
        return;
      }
      res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ok\n' : 'not ok\n');
    };
    if (path === '/metrics' && routes.registry !== undefined) {
      routes.registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': routes.registry?.contentType ?? 'text/plain' }).end(text);
        },
        (err: unknown) => {
          res.writeHead(500).end(String(err));
        },
      );
    } else if (path === '/healthz') check(routes.healthz?.() ?? true);
    else if (path === '/readyz') check(routes.readyz?.());
    else check(undefined);
  });
  await listenOn(server, port, host);
  const a = server.address();
  const address =
    a !== null && typeof a === 'object' ? `${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}` : addr;
  return {
    address,
    stop: () =>
      new Promise((r) => {
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
