/**
 * ApiClient against a loopback HTTP server that records what it is sent: the bearer token read
 * from a file on a schedule (and again after a 401), timeouts, aborts, error bodies, and a
 * silent watch ended by the inactivity timeout. The real API server is in
 * test/integration/transport/client.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { errorKind, isConflict } from '../../../src/runtime/errors.ts';
import { ApiClient, ApiError, type RequestRecord } from '../../../src/transport/client.ts';
import type { ClusterConfig } from '../../../src/transport/config.ts';
import { plainClusterConfig } from '../../support/api-client.ts';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

describe('ApiClient', () => {
  let server: Server;
  let handler: Handler = (_req, res) => res.end('{}');
  let base = '';
  const dir = mkdtempSync(join(tmpdir(), 'fencepost-client-'));
  const clients: ApiClient[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      handler(req, res);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.close();
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  const client = (cfg: Partial<ClusterConfig>, o: ConstructorParameters<typeof ApiClient>[1] = {}): ApiClient => {
    const c = new ApiClient(plainClusterConfig(base, cfg), o);
    clients.push(c);
    return c;
  };

  it('reads a token file once per reload period, and again at once after a 401', async () => {
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'one\n');
    const seen: (string | undefined)[] = [];
    handler = (req, res) => {
      seen.push(req.headers.authorization);
      res.statusCode = req.headers.authorization === 'Bearer old' ? 401 : 200;
      res.end('{}');
    };
    let now = 0;
    const c = client({ tokenFile }, { reloadMs: 60_000, nowMs: () => now });
    await c.request({ method: 'GET', path: '/a' });
    writeFileSync(tokenFile, 'two');
    await c.request({ method: 'GET', path: '/a' }); // within the period: not read again
    now = 60_000;
    await c.request({ method: 'GET', path: '/a' });
    expect(seen).toEqual(['Bearer one', 'Bearer one', 'Bearer two']);

    writeFileSync(tokenFile, 'old');
    now = 120_000;
    await expect(c.request({ method: 'GET', path: '/a' })).rejects.toMatchObject({ statusCode: 401 });
    writeFileSync(tokenFile, 'three');
    await c.request({ method: 'GET', path: '/a' }); // same instant, but the 401 forgot the token
    expect(seen.slice(3)).toEqual(['Bearer old', 'Bearer three']);
  });

  it('sends JSON with its content type, and parses the answer', async () => {
    let got: { method?: string | undefined; url?: string | undefined; type?: string | undefined; body: string } = {
      body: '',
    };
    handler = (req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        got = { method: req.method, url: req.url, type: req.headers['content-type'], body };
        res.end(JSON.stringify({ ok: true }));
      });
    };
    const c = client({});
    const answer = await c.request<{ ok: boolean }>({
      method: 'PATCH',
      path: '/api/v1/namespaces/ns/pods/p',
      query: { dryRun: 'All', skipped: undefined },
      body: { metadata: { uid: 'u' } },
      contentType: 'application/merge-patch+json',
    });
    expect(answer).toEqual({ ok: true });
    expect(got).toEqual({
      method: 'PATCH',
      url: '/api/v1/namespaces/ns/pods/p?dryRun=All',
      type: 'application/merge-patch+json',
      body: '{"metadata":{"uid":"u"}}',
    });
  });

  it('rejects a non-2xx with an ApiError carrying the Status, or the text of a body that is not JSON', async () => {
    handler = (req, res) => {
      res.statusCode = 409;
      res.end(
        req.url === '/json' ? JSON.stringify({ kind: 'Status', reason: 'Conflict', message: 'stale' }) : '<html>',
      );
    };
    const c = client({});
    const json = await c.request({ method: 'PUT', path: '/json', body: {} }).catch((e: unknown) => e);
    expect(json).toBeInstanceOf(ApiError);
    expect(json).toMatchObject({ statusCode: 409, status: { reason: 'Conflict', message: 'stale' } });
    expect((json as Error).message).toBe('PUT /json: HTTP 409: stale');
    const html = await c.request({ method: 'PUT', path: '/html', body: {} }).catch((e: unknown) => e);
    expect(html).toMatchObject({ statusCode: 409, body: '<html>', status: undefined });
    expect(isConflict(html)).toBe(true);
  });

  it('ends a request that gets no answer at its timeout (a TimeoutError), or when its signal aborts, and counts it as <error>', async () => {
    handler = () => undefined; // never answers
    const seen: RequestRecord[] = [];
    const c = client({}, { onRequest: (r) => seen.push(r) });
    const timedOut = await c.request({ method: 'GET', path: '/slow', timeoutMs: 50 }).catch((e: unknown) => e);
    expect(timedOut).toMatchObject({ name: 'TimeoutError', message: 'GET /slow timed out after 50 ms' });
    expect(errorKind(timedOut)).toBe('timeout');
    const ac = new AbortController();
    const aborted = c.request({ method: 'GET', path: '/slow', signal: ac.signal });
    setTimeout(() => ac.abort(new Error('given up')), 20);
    await expect(aborted).rejects.toThrow('given up');
    const host = new URL(base).host;
    expect(seen).toEqual([
      { code: '<error>', method: 'GET', host },
      { code: '<error>', method: 'GET', host },
    ]);
  });

  it('feeds a watch its events line by line, across chunk boundaries, and ends a silent watch with a TimeoutError', async () => {
    // A request an earlier test gave up on may reach the server only now (a loaded machine): answer
    // it 404 rather than fail inside the server, and check the watch's own request below.
    const urls: string[] = [];
    handler = (req, res) => {
      if (!req.url?.startsWith('/w?')) return void res.writeHead(404).end();
      urls.push(req.url);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"type":"ADDED","object":{"n":1}}\n{"type":"MODI');
      setTimeout(() => res.write('FIED","object":{"n":2}}\n'), 10);
      // then silence
    };
    const c = client({}, { watchIdleMs: 200 });
    const events: [string, unknown][] = [];
    let opened = false;
    const err = await c
      .watch(
        { path: '/w', query: { resourceVersion: '5' } },
        {
          onOpen: () => (opened = true),
          onEvent: (type, obj) => events.push([type, obj]),
        },
      )
      .catch((e: unknown) => e);
    expect(opened).toBe(true);
    expect(urls).toEqual(['/w?resourceVersion=5&watch=true']);
    expect(events).toEqual([
      ['ADDED', { n: 1 }],
      ['MODIFIED', { n: 2 }],
    ]);
    expect(err).toMatchObject({ name: 'TimeoutError', message: 'watch /w silent for 200 ms' });
  });

  it('resolves a watch the server ends', async () => {
    handler = (_req, res) => {
      res.writeHead(200);
      res.end('{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}\n');
    };
    const events: string[] = [];
    await client({}).watch({ path: '/w' }, { onEvent: (t) => events.push(t) });
    expect(events).toEqual(['BOOKMARK']);
  });
});
