/**
 * The HTTP and Server-Sent Events plumbing of a page that fencepost serves itself, shared by the
 * dashboard (server.ts) and the race page of `npm run demo -- --web` (hack/race/server.ts): each
 * keeps its routes and what it streams, and composes a {@link PageServer} for the rest.
 *
 * A PageServer listens, puts {@link SECURITY_HEADERS} on every response, refuses a Host that is
 * not a loopback name while it listens on loopback (headers.ts, against DNS rebinding), keeps its
 * SSE streams alive with a comment every `heartbeatMs`, and on close ends the streams and drops
 * every connection. The reply helpers below send a file, JSON or text with the headers both pages
 * use.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Asset } from './static-files.ts';
import { SECURITY_HEADERS, hostAllowed, isLoopbackHost } from './headers.ts';

/** PageServerOptions configures {@link PageServer}. */
export interface PageServerOptions {
  readonly host: string;
  /** port: 0 picks a free one. */
  readonly port: number;
  /** heartbeatMs: an SSE comment this often keeps proxies and the browser from timing out. Defaults to 15 s. */
  readonly heartbeatMs?: number;
  /**
   * maxBuffered: bytes a stream may leave unread before {@link PageServer.send} drops it (its
   * EventSource reconnects). Defaults to no limit.
   */
  readonly maxBuffered?: number;
  /** misdirected answers a request whose Host is refused (421); the security headers are set. */
  readonly misdirected: (res: ServerResponse) => void;
  /** handle answers every other request; the security headers are set. */
  readonly handle: (req: IncomingMessage, res: ServerResponse) => void;
}

/** PageServer: see the module comment. */
export class PageServer {
  readonly #o: PageServerOptions;
  readonly #server: Server;
  readonly #streams = new Map<ServerResponse, () => void>();
  #heartbeat: NodeJS.Timeout | undefined;
  #port = 0;
  #loopback = true;

  constructor(o: PageServerOptions) {
    this.#o = o;
    this.#server = createServer((req, res) => {
      for (const [k, v] of Object.entries(SECURITY_HEADERS)) res.setHeader(k, v);
      if (this.#loopback && !hostAllowed(req.headers.host, this.#port)) o.misdirected(res);
      else o.handle(req, res);
    });
    // Keep-alive sockets of finished page loads must not hold close() up.
    this.#server.keepAliveTimeout = 5_000;
  }

  /** start listens; resolves with the address bound, rejects if listening fails (e.g. the port is taken). */
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
      for (const res of [...this.#streams.keys()]) this.send(res, ': keep-alive\n\n');
    }, this.#o.heartbeatMs ?? 15_000);
    this.#heartbeat.unref();
    return address;
  }

  /**
   * openStream answers req with an SSE stream: the event-stream headers, then (unless req is a
   * HEAD, which ends there and returns false) a `retry: 1000` (a reconnecting EventSource waits that
   * long: 1 s keeps a restarted server's page current) and `first`. The stream then gets the
   * heartbeat until it closes, is dropped, or the server closes; `forget` (default: nothing) runs
   * when it closes or is dropped, so the caller can stop sending to it.
   */
  openStream(req: IncomingMessage, res: ServerResponse, first: string, forget: () => void = () => undefined): boolean {
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      Connection: 'keep-alive',
    });
    if (req.method === 'HEAD') {
      res.end();
      return false;
    }
    res.write(`retry: 1000\n\n${first}`);
    this.#streams.set(res, forget);
    res.on('close', () => {
      this.#streams.delete(res);
      forget();
    });
    return true;
  }

  /** send writes frame to a stream, or drops the stream (destroys it and runs its forget) when it has more than maxBuffered bytes unread. */
  send(res: ServerResponse, frame: string): void {
    if (this.#o.maxBuffered !== undefined && res.writableLength > this.#o.maxBuffered) {
      this.#streams.get(res)?.();
      this.#streams.delete(res);
      res.destroy();
      return;
    }
    res.write(frame);
  }

  /** broadcast sends frame to every open stream (as {@link send}). */
  broadcast(frame: string): void {
    for (const res of [...this.#streams.keys()]) this.send(res, frame);
  }

  /** streams: how many SSE streams are open. */
  streams(): number {
    return this.#streams.size;
  }

  /** close ends every stream, drops every connection and stops listening. */
  async close(): Promise<void> {
    clearInterval(this.#heartbeat);
    for (const res of this.#streams.keys()) res.end();
    this.#streams.clear();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** sseFrame is one Server-Sent Event: its name and its data as JSON. */
export function sseFrame(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** sendAsset answers with a file: its ETag, `no-cache` (revalidate each time), 304 when the page has it already. */
export function sendAsset(req: IncomingMessage, res: ServerResponse, a: Asset): void {
  res.setHeader('ETag', a.etag);
  res.setHeader('Cache-Control', 'no-cache');
  if (req.headers['if-none-match'] === a.etag) {
    res.writeHead(304).end();
    return;
  }
  res.writeHead(200, { 'Content-Type': a.type, 'Content-Length': a.body.length });
  res.end(req.method === 'HEAD' ? undefined : a.body);
}

/** sendJson answers with body as JSON, not to be stored. */
export function sendJson(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, {
    'Content-Type': 'application/json; charset=utf-8',
    'Cache-Control': 'no-store',
    'Content-Length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** sendText answers with plain text. */
export function sendText(res: ServerResponse, code: number, text: string): void {
  res.writeHead(code, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}
