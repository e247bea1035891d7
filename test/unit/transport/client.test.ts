/**
 * ApiClient against a loopback HTTP server that records what it is sent: the bearer token read
 * from a file on a schedule (and again after a 401), timeouts, aborts, error bodies, and a
 * silent watch ended by the inactivity timeout. The real API server is in
 * test/integration/transport/client.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect as netConnect, type AddressInfo, type Socket } from 'node:net';
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

  it('sends username and password as HTTP basic, and impersonation as Impersonate-* headers (groups and extras repeated)', async () => {
    let seen: IncomingMessage['headers'] = {};
    let raw: string[] = [];
    handler = (req, res) => {
      seen = req.headers;
      raw = req.rawHeaders;
      res.end('{}');
    };
    await client({
      basic: { username: 'admin', password: 'p:w' },
      impersonate: { user: 'alice', uid: 'u-1', groups: ['dev', 'ops'], extra: { 'acme.io/scope': ['a', 'b'] } },
    }).request({ method: 'GET', path: '/a' });
    expect(seen.authorization).toBe(`Basic ${Buffer.from('admin:p:w').toString('base64')}`);
    expect(seen['impersonate-user']).toBe('alice');
    expect(seen['impersonate-uid']).toBe('u-1');
    const all = (name: string): string[] => raw.filter((_v, i) => i % 2 === 1 && raw[i - 1]?.toLowerCase() === name);
    expect(all('impersonate-group')).toEqual(['dev', 'ops']);
    expect(all('impersonate-extra-acme.io%2fscope')).toEqual(['a', 'b']);
  });

  it('prefers a bearer token to basic credentials, as client-go does', async () => {
    let auth: string | undefined;
    handler = (req, res) => {
      auth = req.headers.authorization;
      res.end('{}');
    };
    await client({ token: 't', basic: { username: 'u', password: 'p' } }).request({ method: 'GET', path: '/a' });
    expect(auth).toBe('Bearer t');
  });

  it('tunnels through an HTTP CONNECT proxy (proxy-url), one tunnel per kept-alive connection, with Proxy-Authorization', async () => {
    const connects: { target: string; auth: string | undefined }[] = [];
    const proxy = createServer((_req, res) => {
      res.statusCode = 405;
      res.end();
    });
    const tunnels = new Set<Socket>();
    proxy.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
      tunnels.add(client);
      connects.push({ target: req.url ?? '', auth: req.headers['proxy-authorization'] });
      const [host, port] = (req.url ?? '').split(':');
      const upstream = netConnect({ host, port: Number(port) }, () => {
        client.write('HTTP/1.1 200 Connection established\r\n\r\n');
        if (head.length > 0) upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      });
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const proxyPort = (proxy.address() as AddressInfo).port;
    let paths: string[] = [];
    handler = (req, res) => {
      paths.push(req.url ?? '');
      res.end('{"ok":true}');
    };
    try {
      const c = client({ proxy: new URL(`http://me:s%40cret@127.0.0.1:${proxyPort}`) });
      for (let i = 0; i < 3; i++) expect(await c.request({ method: 'GET', path: `/p${i}` })).toEqual({ ok: true });
      expect(paths).toEqual(['/p0', '/p1', '/p2']);
      expect(connects).toEqual([
        { target: new URL(base).host, auth: `Basic ${Buffer.from('me:s@cret').toString('base64')}` },
      ]);

      // A proxy that refuses the tunnel fails the request, naming the proxy and its answer.
      paths = [];
      const refusing = createServer();
      refusing.on('connect', (_req: IncomingMessage, s: Socket) => {
        s.end('HTTP/1.1 403 Forbidden\r\n\r\n');
      });
      await new Promise<void>((r) => refusing.listen(0, '127.0.0.1', r));
      const port = (refusing.address() as AddressInfo).port;
      try {
        await expect(
          client({ proxy: new URL(`http://127.0.0.1:${port}`) }).request({ method: 'GET', path: '/x' }),
        ).rejects.toThrow(`proxy 127.0.0.1:${port} refused CONNECT ${new URL(base).host}: HTTP/1.1 403 Forbidden`);
        expect(paths).toEqual([]);
      } finally {
        refusing.closeAllConnections();
        await new Promise((r) => refusing.close(r));
      }
    } finally {
      // A tunnel is no longer an HTTP connection of the proxy's server: it is ended by hand.
      for (const t of tunnels) t.destroy();
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  });

  it('oidc: sends the id-token while it is valid; once expired, refreshes it at the issuer token endpoint (discovery), and keeps the new refresh token', async () => {
    const jwt = (expSeconds: number, tag: string): string =>
      `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify({ exp: expSeconds, tag })).toString('base64url')}.sig`;
    let now = 1_000_000_000_000;
    const fresh = jwt(now / 1000 + 3600, 'fresh');
    const refreshed: string[] = [];
    const seen: (string | undefined)[] = [];
    handler = (req, res) => {
      if (req.url === '/idp/.well-known/openid-configuration') {
        res.end(JSON.stringify({ token_endpoint: `${base}/idp/token` }));
        return;
      }
      if (req.url === '/idp/token') {
        let body = '';
        req.on('data', (c: Buffer) => (body += c.toString()));
        req.on('end', () => {
          refreshed.push(body);
          res.end(JSON.stringify({ id_token: fresh, refresh_token: 'r2' }));
        });
        return;
      }
      seen.push(req.headers.authorization);
      res.end('{}');
    };
    const valid = jwt(now / 1000 + 60, 'valid');
    const c = client(
      {
        oidc: {
          idToken: valid,
          refreshToken: 'r1',
          issuerUrl: `${base}/idp`,
          clientId: 'kubectl',
          clientSecret: undefined,
          ca: undefined,
          user: 'me',
        },
      },
      { wallNow: () => now },
    );
    await c.request({ method: 'GET', path: '/a' });
    now += 55_000; // within client-go's 10 s margin of exp: refreshed first
    await c.request({ method: 'GET', path: '/a' });
    await c.request({ method: 'GET', path: '/a' });
    expect(seen).toEqual([`Bearer ${valid}`, `Bearer ${fresh}`, `Bearer ${fresh}`]);
    expect(refreshed).toEqual(['grant_type=refresh_token&refresh_token=r1&client_id=kubectl']);

    // An expired id-token without a refresh token is an error naming the user's auth provider.
    const stale = client(
      {
        oidc: {
          idToken: jwt(now / 1000 - 1, 'stale'),
          refreshToken: undefined,
          issuerUrl: undefined,
          clientId: undefined,
          clientSecret: undefined,
          ca: undefined,
          user: 'me',
        },
      },
      { wallNow: () => now },
    );
    await expect(stale.request({ method: 'GET', path: '/a' })).rejects.toThrow(
      'users[me].user.auth-provider (oidc): the id-token has expired, and there is no refresh-token to get a new one',
    );
  });
});
