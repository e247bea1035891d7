/**
 * The agent's local HTTP API (loopback only), usable with curl from any language:
 *   GET  /v1/locks/NAME                  → LockSnapshot JSON
 *   GET  /v1/locks/NAME/events           → Server-Sent Events: `state` first, then granted/renewed/lost/released
 *   POST /v1/locks/NAME/acquire?wait=D&runId=ID → asks for the lock (Mutex: joins the FIFO queue), then
 *                                          200 when held (waits up to D, default 0), 408 when not held in time
 *   POST /v1/locks/NAME/release          → withdraws the request and releases the Lease; 200 after
 *   GET  /healthz, /readyz, /metrics
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { parseDuration } from '../config/duration.ts';
import type { LockEvent, LockSession } from './session.ts';

/** AgentApi is a listening API server. */
export interface AgentApi { readonly address: string; stop(): Promise<void> }

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
}

/** waitHeld resolves true once the session holds the lock, false after waitMs or if the client went away. */
function waitHeld(session: LockSession, waitMs: number, req: IncomingMessage): Promise<boolean> {
  if (session.heldToken() !== undefined) return Promise.resolve(true);
  if (waitMs <= 0) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (v: boolean): void => { clearTimeout(timer); off(); req.off('close', gone); resolve(v); };
    const off = session.onEvent((e) => { if (e.type === 'granted') done(true); });
    const gone = (): void => { done(false); };
    const timer = setTimeout(() => { done(session.heldToken() !== undefined); }, waitMs);
    req.on('close', gone);
  });
}

/** serveAgentApi listens on host:port (loopback; checked by the config) for the given sessions. */
export async function serveAgentApi(host: string, port: number, sessions: ReadonlyMap<string, LockSession>, routes: { registry: Registry; ready: () => boolean }): Promise<AgentApi> {
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://agent');
    const path = url.pathname;
    if (path === '/healthz') { res.writeHead(200).end('ok\n'); return; }
    if (path === '/readyz') { const ok = routes.ready(); res.writeHead(ok ? 200 : 503).end(ok ? 'ok\n' : 'not ready\n'); return; }
    if (path === '/metrics') {
      routes.registry.metrics().then((t) => { res.writeHead(200, { 'content-type': routes.registry.contentType }).end(t); }, (err: unknown) => { res.writeHead(500).end(String(err)); });
      return;
    }
    const m = /^\/v1\/locks\/([^/]+)(\/events|\/acquire|\/release)?$/.exec(path);
    if (m === null) { json(res, 404, { error: `no route ${req.method ?? ''} ${path}` }); return; }
    const name = decodeURIComponent(m[1] ?? '');
    const session = sessions.get(name);
    if (session === undefined) { json(res, 404, { error: `this agent does not manage lock ${JSON.stringify(name)}`, locks: [...sessions.keys()] }); return; }
    const action = m[2];
    if (action === undefined && req.method === 'GET') { json(res, 200, session.snapshot()); return; }
    if (action === '/events' && req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
      res.write(`event: state\ndata: ${JSON.stringify(session.snapshot())}\n\n`);
      const off = session.onEvent((e: LockEvent) => { res.write(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`); });
      const ping = setInterval(() => { res.write(': ping\n\n'); }, 15_000);
      req.on('close', () => { off(); clearInterval(ping); });
      return;
    }
    if (action === '/acquire' && req.method === 'POST') {
      let waitMs: number;
      try { waitMs = parseDuration(url.searchParams.get('wait') ?? '0', 'wait'); } catch (err) { json(res, 400, { error: (err as Error).message }); return; }
      const runId = url.searchParams.get('runId') ?? undefined;
      session.request(runId).then(
        () => waitHeld(session, waitMs, req).then((held) => { if (!res.writableEnded) json(res, held ? 200 : 408, session.snapshot()); }),
        (err: unknown) => { json(res, 502, { error: `Failed to request the lock: ${err instanceof Error ? err.message : String(err)}` }); },
      );
      return;
    }
    if (action === '/release' && req.method === 'POST') {
      session.withdraw().then(() => session.release()).then(() => { json(res, 200, session.snapshot()); }, (err: unknown) => { json(res, 502, { error: err instanceof Error ? err.message : String(err) }); });
      return;
    }
    json(res, 405, { error: `${req.method ?? ''} not allowed on ${path}` });
  });
  await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen(port, host, resolve); });
  const a = server.address();
  const address = a !== null && typeof a === 'object' ? `${a.address}:${a.port}` : `${host}:${port}`;
  return { address, stop: () => new Promise((r) => { server.close(() => r()); server.closeAllConnections(); }) };
}
