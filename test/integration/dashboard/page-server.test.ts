/**
 * The PageServer both the dashboard and the race page compose (src/dashboard/page-server.ts), on
 * a real loopback socket and without a cluster: the security headers on every response, the SSE
 * stream's first bytes, the keep-alive heartbeat, the drop of a stream that does not read (its
 * forget runs), and close ending the open streams.
 */
import { get, type IncomingMessage } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { SECURITY_HEADERS } from '../../../src/dashboard/headers.ts';
import { PageServer, sendText, sseFrame, type PageServerOptions } from '../../../src/dashboard/page-server.ts';
import { eventually } from '../../support/env.ts';

let server: PageServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** start runs a PageServer whose only route opens a stream starting with a `hello` event; forgotten counts forget calls. */
async function start(o: Partial<PageServerOptions> = {}): Promise<{ port: number; forgotten: () => number }> {
  let forgotten = 0;
  const s = new PageServer({
    host: '127.0.0.1',
    port: 0,
    misdirected: (res) => {
      sendText(res, 421, 'no\n');
    },
    handle: (req, res) => {
      s.openStream(req, res, sseFrame('hello', { n: 1 }), () => {
        forgotten++;
      });
    },
    ...o,
  });
  server = s;
  const { port } = await s.start();
  return { port, forgotten: () => forgotten };
}

/** open starts a GET of /events and resolves with the response (its body not yet read). */
function open(port: number): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path: '/events' }, resolve).on('error', reject);
  });
}

/** collect appends the response's body to a string that the returned function reads. */
function collect(res: IncomingMessage): () => string {
  let body = '';
  res.setEncoding('utf8');
  res.on('data', (c: string) => {
    body += c;
  });
  return () => body;
}

describe('PageServer', () => {
  it('opens a stream with the security headers, the event-stream headers, retry and the first frame', async () => {
    const { port } = await start();
    const res = await open(port);
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) expect(res.headers[k.toLowerCase()], k).toBe(v);
    expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(res.headers['cache-control']).toBe('no-store');
    const body = collect(res);
    await eventually(() => expect(body()).toBe('retry: 1000\n\nevent: hello\ndata: {"n":1}\n\n'));
    expect(server?.streams()).toBe(1);
    res.destroy();
  });

  it('sends a keep-alive comment every heartbeatMs', async () => {
    const { port } = await start({ heartbeatMs: 20 });
    const res = await open(port);
    const body = collect(res);
    await eventually(() => expect(body().split(': keep-alive\n\n').length).toBeGreaterThan(3));
    res.destroy();
  });

  it('drops a stream that leaves more than maxBuffered bytes unread, and runs its forget', async () => {
    const { port, forgotten } = await start({ maxBuffered: 64 * 1024 });
    const res = await open(port);
    res.pause(); // reads nothing: the socket's buffers fill, then the response's
    await eventually(() => expect(server?.streams()).toBe(1));
    const frame = sseFrame('big', 'x'.repeat(64 * 1024));
    for (let i = 0; i < 2000 && server?.streams() === 1; i++) {
      server.broadcast(frame);
      await new Promise((r) => setImmediate(r));
    }
    expect(server?.streams()).toBe(0);
    expect(forgotten()).toBeGreaterThanOrEqual(1);
  });

  it('close ends every open stream', async () => {
    const { port } = await start();
    const res = await open(port);
    const ended = new Promise<void>((resolve) => res.on('end', resolve).on('close', resolve));
    res.resume();
    await eventually(() => expect(server?.streams()).toBe(1));
    await server?.close();
    server = undefined;
    await ended;
  });
});
