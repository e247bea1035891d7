/**
 * The agent API's dispatcher (src/agent/http-router.ts) over a small route table, on a loopback
 * server of its own: the gates every route passes in order (local-only, then the target, then the
 * handler), problems for every error, and event streams that are not counted as busy.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { serveAgentApi } from '../../../src/agent/http-api.ts';
import { Router, sendJson, type Route } from '../../../src/agent/http-router.ts';
import openapi from '../../../src/agent/openapi.json' with { type: 'json' };

/** typeOf: the problem type of an answer's body. */
function typeOf(a: Answer): string {
  return (JSON.parse(a.body) as { type?: string }).type ?? '';
}

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

function call(
  port: number,
  method: string,
  path: string,
  o: { headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, agent: false, headers: o.headers ?? {} }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
      });
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

const JSON_POST = { headers: { 'content-type': 'application/json' }, body: '{}' };

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => server?.close(() => r()) ?? r());
  server = undefined;
});

async function serve(
  routes: readonly Route[],
  log?: { error(obj: object, msg: string): void },
): Promise<{ port: number; router: Router }> {
  const router = new Router(routes, { host: '127.0.0.1', ...(log !== undefined ? { log } : {}) });
  server = createServer(router.dispatch);
  await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, router };
}

const TABLE: readonly Route[] = [
  { method: 'GET', path: '/things/{id}', handle: ({ res, params }) => sendJson(res, 200, { id: params.id }) },
  { method: 'POST', path: '/things/{id}/poke', handle: ({ res, params }) => sendJson(res, 200, { poked: params.id }) },
  {
    method: 'GET',
    path: '/boom',
    handle: () => {
      throw new Error('handler bug');
    },
  },
];

describe('the agent API dispatcher', () => {
  it('serves every operation of openapi.json, and only those: its route table and the document agree', async () => {
    const api = await serveAgentApi('127.0.0.1', 0, new Map(), { ready: () => true });
    try {
      const port = Number(api.address.split(':').at(-1));
      const ops = Object.entries(openapi.paths).flatMap(([path, item]) =>
        Object.keys(item)
          .filter((k) => ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'].includes(k))
          .map((m) => ({ path: path.replace('{name}', 'db'), method: m.toUpperCase() })),
      );
      expect(ops.length).toBe(9);
      for (const { path, method } of ops) {
        const a = await call(port, method, path, method === 'POST' ? JSON_POST : {});
        // No lock is managed: a lock's endpoint answers unknown-lock, the others themselves.
        expect([path, method, a.status === 404 ? typeOf(a).split('/').at(-1) : a.status]).toEqual([
          path,
          method,
          path.startsWith('/v1/locks/') ? 'unknown-lock' : 200,
        ]);
        const other = method === 'GET' ? 'POST' : 'GET';
        const wrong = await call(port, other, path, other === 'POST' ? JSON_POST : {});
        expect([path, other, wrong.status, wrong.headers.allow]).toEqual([path, other, 405, method]);
      }
    } finally {
      await api.stop();
    }
  });

  it('routes by method and path pattern, a parameter being one path segment (still percent-encoded)', async () => {
    const { port } = await serve(TABLE);
    expect(JSON.parse((await call(port, 'GET', '/things/a%2Fb')).body)).toEqual({ id: 'a%2Fb' });
    expect(JSON.parse((await call(port, 'POST', '/things/x/poke', JSON_POST)).body)).toEqual({ poked: 'x' });
    const nested = await call(port, 'GET', '/things/a/b');
    expect([nested.status, typeOf(nested)]).toEqual([404, expect.stringMatching(/no-route$/)]);
  });

  it('answers a path of another method 405 with the allowed method, and no path 404', async () => {
    const { port } = await serve(TABLE);
    const wrong = await call(port, 'POST', '/things/x', JSON_POST);
    expect(wrong.status).toBe(405);
    expect(wrong.headers.allow).toBe('GET');
    expect(wrong.headers['content-type']).toBe('application/problem+json');
    expect((await call(port, 'GET', '/nothing')).status).toBe(404);
  });

  it('refuses a foreign Host and a browser before the path is read, and a POST without the JSON body', async () => {
    const { port } = await serve(TABLE);
    const foreign = await call(port, 'GET', '/nothing', { headers: { host: 'evil.example' } });
    expect([foreign.status, foreign.headers.connection]).toEqual([403, 'close']);
    expect((await call(port, 'GET', '/things/x', { headers: { origin: 'https://evil.example' } })).status).toBe(403);
    expect((await call(port, 'POST', '/things/x/poke', { body: '{}' })).status).toBe(415);
    expect((await call(port, 'POST', '/things/x/poke', { ...JSON_POST, body: '[]' })).status).toBe(415);
    const member = await call(port, 'POST', '/things/x/poke', { ...JSON_POST, body: '{"a":1}' });
    expect(member.status).toBe(400); // a parameter in the body, not the query
  });

  it('answers a handler that throws 500 internal-error, logs it, and goes on serving', async () => {
    const logged: string[] = [];
    const { port } = await serve(TABLE, { error: (_o, msg) => logged.push(msg) });
    const failed = await call(port, 'GET', '/boom');
    expect([failed.status, typeOf(failed)]).toEqual([500, expect.stringMatching(/internal-error$/)]);
    expect(logged).toEqual(['HTTP handler failed']);
    expect((await call(port, 'GET', '/things/y')).status).toBe(200);
  });

  it('counts requests being answered as busy, but not an open event stream, and closes streams on demand', async () => {
    let unsubscribed = false;
    let release: (() => void) | undefined;
    const { port, router } = await serve([
      {
        method: 'GET',
        path: '/stream',
        stream: true,
        handle: ({ openStream }) => {
          openStream('retry: 1\n\n', () => () => {
            unsubscribed = true;
          });
        },
      },
      {
        method: 'GET',
        path: '/slow',
        handle: ({ res }) => {
          release = () => sendJson(res, 200, {});
        },
      },
    ]);
    const first = await new Promise<string>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path: '/stream', agent: false }, (res) => {
        expect(res.headers['content-type']).toBe('text/event-stream');
        res.setEncoding('utf8');
        res.once('data', (c: string) => resolve(c));
      });
      req.on('error', reject);
      req.end();
    });
    expect(first).toBe('retry: 1\n\n');
    expect(router.answering).toBe(0);
    const slow = call(port, 'GET', '/slow');
    await expect.poll(() => router.answering).toBe(1);
    let idle = false;
    router.whenIdle(() => (idle = true));
    expect(idle).toBe(false);
    release?.();
    expect((await slow).status).toBe(200);
    await expect.poll(() => idle).toBe(true);
    router.closeStreams();
    expect(unsubscribed).toBe(true);
  });
});
