import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  defaultResource,
  FenceBook,
  fencingSignalOf,
  fencingTokenOf,
  httpGuard,
  normalizeResource,
} from '../../../src/guards/http-guard.ts';
import { MAX_TOKEN } from '../../../src/protocol/token.ts';

const MALFORMED = ['', '-1', '01', '1e3', '0x10', '1.5', ' 1', 'NaN', '9223372036854775808', '5, 6'];

describe('FenceBook', () => {
  it('accepts the first token, and check alone never raises the mark', () => {
    const book = new FenceBook();
    expect(book.check('/r', '5')).toEqual({ ok: true, token: 5n });
    expect(book.highWater('/r')).toBeUndefined();
    expect(book.check('/r', '3')).toEqual({ ok: true, token: 3n });
  });

  it('commit raises the mark and never lowers it; equal tokens pass, lower ones are stale', () => {
    const book = new FenceBook();
    expect(book.commit('/r', 7n)).toBe(true);
    expect(book.check('/r', '7')).toEqual({ ok: true, token: 7n });
    expect(book.check('/r', '8')).toEqual({ ok: true, token: 8n });
    expect(book.check('/r', '6')).toEqual({
      ok: false,
      status: 409,
      reason: 'stale fencing token 6 < 7',
      highWater: 7n,
    });
    expect(book.commit('/r', 6n)).toBe(false);
    expect(book.highWater('/r')).toBe(7n);
    expect(book.check('/other', '1')).toEqual({ ok: true, token: 1n });
  });

  it('compares exactly past 2^53 and up to 2^63-1', () => {
    const book = new FenceBook();
    book.commit('/r', 9007199254740993n);
    expect(book.check('/r', '9007199254740992')).toMatchObject({
      ok: false,
      status: 409,
      reason: 'stale fencing token 9007199254740992 < 9007199254740993',
    });
    book.commit('/r', MAX_TOKEN);
    expect(book.check('/r', MAX_TOKEN.toString())).toEqual({ ok: true, token: MAX_TOKEN });
  });

  it('refuses missing and malformed tokens with 400 naming the header and the value, mark unchanged', () => {
    const book = new FenceBook();
    book.commit('/r', 5n);
    expect(book.check('/r', undefined)).toEqual({ ok: false, status: 400, reason: 'missing Fencing-Token header' });
    for (const bad of MALFORMED) {
      const v = book.check('/r', bad, 'X-Fence');
      expect(v.ok, bad).toBe(false);
      if (v.ok) continue;
      expect(v.status).toBe(400);
      expect(v.reason).toContain('X-Fence header');
      expect(v.reason).toContain(bad === '9223372036854775808' ? bad : JSON.stringify(bad));
    }
    expect(book.check('/r', ['5', '6'])).toMatchObject({ ok: false, status: 400 });
    expect(book.highWater('/r')).toBe(5n);
  });

  it('restores from a snapshot', () => {
    const book = new FenceBook();
    book.commit('/a', 3n);
    book.commit('/b', 9007199254740993n);
    const again = new FenceBook({ initial: book.snapshot() });
    expect(again.highWater('/b')).toBe(9007199254740993n);
    expect(again.check('/a', '2')).toMatchObject({ ok: false, status: 409 });
    expect(() => new FenceBook({ initial: [['/x', -1n]] })).toThrow(/initial mark/);
  });

  it('enter serialises one resource in FIFO order and leaves others free', async () => {
    const book = new FenceBook();
    const order: string[] = [];
    const first = await book.enter('/r');
    const second = book.enter('/r').then((leave) => {
      order.push('second');
      return leave;
    });
    const third = book.enter('/r').then((leave) => {
      order.push('third');
      return leave;
    });
    const other = await book.enter('/other');
    order.push('other');
    await sleep(5);
    expect(order).toEqual(['other']);
    first();
    first(); // leaving twice is harmless
    (await second)();
    (await third)();
    other();
    expect(order).toEqual(['other', 'second', 'third']);
    (await book.enter('/r'))();
  });

  it('guarded commits when the write resolves, not when it rejects or is refused', async () => {
    const book = new FenceBook();
    await expect(book.guarded('/r', '9', () => Promise.reject(new Error('disk full')))).rejects.toThrow('disk full');
    expect(book.highWater('/r')).toBeUndefined();
    expect(await book.guarded('/r', '4', (t) => Promise.resolve(`wrote ${t}`))).toEqual({ ok: true, value: 'wrote 4' });
    expect(book.highWater('/r')).toBe(4n);
    let called = false;
    expect(
      await book.guarded('/r', '3', () => {
        called = true;
        return Promise.resolve(1);
      }),
    ).toMatchObject({ ok: false, status: 409 });
    expect(called).toBe(false);
    // Concurrent guarded writes: the stale one cannot slip in while the newer one is writing.
    const store: string[] = [];
    const slow = book.guarded('/r', '6', async () => {
      await sleep(20);
      store.push('6');
    });
    const late = book.guarded('/r', '5', () => {
      store.push('5');
      return Promise.resolve();
    });
    expect((await slow).ok).toBe(true);
    expect(await late).toMatchObject({ ok: false, status: 409, reason: 'stale fencing token 5 < 6' });
    expect(store).toEqual(['6']);
  });
});

describe('defaultResource', () => {
  const req = (url: string): IncomingMessage => ({ url }) as IncomingMessage;
  it('is the path without the query, normalised, and never a host', () => {
    expect(defaultResource(req('/orders/42?x=1'))).toBe('/orders/42');
    expect(defaultResource(req('/orders/x/../42'))).toBe('/orders/42');
    expect(defaultResource(req('//evil/orders'))).toBe('/evil/orders');
    expect(defaultResource(req('/orders/42#frag'))).toBe('/orders/42');
    expect(defaultResource(req('*'))).toBe('*');
    expect(defaultResource(req('/Orders/42/'), { caseInsensitive: true })).toBe('/orders/42');
    expect(defaultResource(req('http://host:8080/orders/42?y'))).toBe('/orders/42');
  });
});

describe('httpGuard on a real node:http server', () => {
  const book = new FenceBook();
  const store = new Map<string, string>();
  const seenTokens: (bigint | undefined)[] = [];
  let server: Server;
  let base: string;

  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    seenTokens.push(fencingTokenOf(req));
    const mode = req.headers['x-mode'];
    if (mode === 'throw') throw new Error('handler bug');
    const finish = (): void => {
      if (mode === 'fail') {
        res.statusCode = 500;
        res.end('write failed');
        return;
      }
      if (mode === 'forbidden') {
        res.writeHead(403).end('no');
        return;
      }
      store.set(defaultResource(req), String(fencingTokenOf(req)));
      res.end('ok');
    };
    // 'hold' outlasts the test's abort, whatever the machine's load.
    if (mode === 'slow') setTimeout(finish, 30);
    else if (mode === 'hold') setTimeout(finish, 500);
    else finish();
  };

  beforeAll(async () => {
    // One mark per path (the explicit, weaker scope): each test below uses paths of its own.
    const guard = httpGuard(book, { scope: 'resource' });
    server = createServer((req, res) => guard(req, res, () => handler(req, res)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const put = async (
    path: string,
    token: string | undefined,
    mode?: string,
  ): Promise<{ status: number; body: string }> => {
    const headers: Record<string, string> = {};
    if (token !== undefined) headers['Fencing-Token'] = token;
    if (mode !== undefined) headers['x-mode'] = mode;
    const r = await fetch(`${base}${path}`, { method: 'PUT', headers });
    return { status: r.status, body: await r.text() };
  };

  it('runs the handler for an accepted token and raises the mark after it succeeds', async () => {
    expect(await put('/a', '5')).toEqual({ status: 200, body: 'ok' });
    expect(book.highWater('/a')).toBe(5n);
    expect(seenTokens.at(-1)).toBe(5n);
    expect(await put('/a?q=1', '5')).toEqual({ status: 200, body: 'ok' });
    expect(await put('/a', '9007199254740993')).toEqual({ status: 200, body: 'ok' });
    expect(store.get('/a')).toBe('9007199254740993');
  });

  it('answers 409 naming both tokens to a stale token, without running the handler', async () => {
    const before = seenTokens.length;
    const r = await put('/a', '9007199254740992');
    expect(r.status).toBe(409);
    expect(r.body).toContain('stale fencing token 9007199254740992 < 9007199254740993');
    expect(JSON.parse(r.body)).toMatchObject({ token: '9007199254740992', highWater: '9007199254740993' });
    expect(seenTokens.length).toBe(before);
    expect(book.highWater('/a')).toBe(9007199254740993n);
  });

  it('answers 400 naming the header to a missing or malformed token, mark unchanged', async () => {
    const before = seenTokens.length;
    const missing = await put('/a', undefined);
    expect(missing.status).toBe(400);
    expect(missing.body).toContain('missing fencing-token header');
    // ' 1' is left out: HTTP strips the blanks around a header value, so it arrives as '1'.
    for (const bad of MALFORMED.filter((b) => b !== ' 1')) {
      const r = await put('/a', bad);
      expect(r.status, bad).toBe(400);
      const error = (JSON.parse(r.body) as { error: string }).error;
      expect(error).toContain('fencing-token header');
      expect(error).toContain(bad === '9223372036854775808' ? bad : JSON.stringify(bad));
    }
    expect(seenTokens.length).toBe(before);
    expect(book.highWater('/a')).toBe(9007199254740993n);
  });

  it('does not raise the mark when the handler fails (500), refuses (403) or throws', async () => {
    await put('/b', '10');
    expect(await put('/b', '20', 'fail')).toEqual({ status: 500, body: 'write failed' });
    expect(await put('/b', '30', 'forbidden')).toEqual({ status: 403, body: 'no' });
    expect((await put('/b', '40', 'throw')).status).toBe(500);
    expect(book.highWater('/b')).toBe(10n);
    expect(store.get('/b')).toBe('10');
    // A lower-but-not-stale token still gets in: the failed ones raised nothing.
    expect((await put('/b', '11')).status).toBe(200);
    expect(book.highWater('/b')).toBe(11n);
  });

  it('serialises requests on one resource: a stale request waits and is refused', async () => {
    const [newer, stale] = await Promise.all([put('/c', '6', 'slow'), sleep(5).then(() => put('/c', '5'))]);
    expect(newer.status).toBe(200);
    expect(stale.status).toBe(409);
    expect(store.get('/c')).toBe('6');
  });

  it('keeps the resource for a handler whose client went away, and commits its successful end', async () => {
    const ac = new AbortController();
    const aborted = fetch(`${base}/d`, {
      method: 'PUT',
      headers: { 'fencing-token': '8', 'x-mode': 'hold' },
      signal: ac.signal,
    }).catch(() => 'aborted');
    // Abort once the handler runs with token 8 (a fixed sleep lost that race on a busy machine:
    // the request had not reached the server yet, so nothing held the resource).
    for (let i = 0; i < 500 && !seenTokens.includes(8n); i++) await sleep(10);
    ac.abort();
    expect(await aborted).toBe('aborted');
    // The handler is still writing with token 8: a request with 7 must wait for it and then lose.
    expect((await put('/d', '7')).status).toBe(409);
    expect(store.get('/d')).toBe('8');
    expect(book.highWater('/d')).toBe(8n);
  });

  it('honours a custom header and resource mapping', async () => {
    const own = new FenceBook();
    const guard = httpGuard(own, { header: 'X-Lock-Token', resource: () => 'everything' });
    const s = createServer((req, res) => guard(req, res, () => res.end('done')));
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
      expect((await fetch(`${url}/x`, { headers: { 'x-lock-token': '3' } })).status).toBe(200);
      const stale = await fetch(`${url}/y`, { headers: { 'x-lock-token': '2' } });
      expect(stale.status).toBe(409);
      const bad = await fetch(`${url}/y`, { headers: { 'fencing-token': '9' } });
      expect(await bad.text()).toContain('missing X-Lock-Token header');
      expect(own.highWater('everything')).toBe(3n);
    } finally {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  });
});

// What `httpGuard(new FenceBook())` does by default, over loopback HTTP: a user who sets no option
// must get the safe behaviour (one mark per lock, no overlap with an abandoned handler).
describe('httpGuard defaults on a real node:http server', () => {
  let server: Server;
  let base: string;
  let book: FenceBook;
  let opts: Parameters<typeof httpGuard>[1] = {};
  const writes: string[] = [];
  const signals: (AbortSignal | undefined)[] = [];

  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    signals.push(fencingSignalOf(req));
    const hold = Number(req.headers['x-hold-ms'] ?? '0');
    const write = (): void => {
      writes.push(`${req.url} ${fencingTokenOf(req)}`);
      res.end('ok');
    };
    if (hold > 0) setTimeout(write, hold);
    else write();
  };

  beforeAll(async () => {
    server = createServer((req, res) => httpGuard(book, opts)(req, res, () => handler(req, res)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const fresh = (o: Parameters<typeof httpGuard>[1] = {}): void => {
    book = new FenceBook();
    opts = o;
    writes.length = 0;
    signals.length = 0;
  };
  const put = async (path: string, token: string, hold = 0): Promise<number> =>
    (await fetch(`${base}${path}`, { method: 'PUT', headers: { 'fencing-token': token, 'x-hold-ms': String(hold) } }))
      .status;

  it('refuses a stale holder writing a path the newer holder never wrote (one mark per lock)', async () => {
    fresh();
    expect(await put('/orders/1', '11')).toBe(200);
    expect(await put('/orders/2', '10')).toBe(409);
    expect(writes).toEqual(['/orders/1 11']);
  });

  it.each([['/orders/42/'], ['/orders/%34%32'], ['/orders//42'], ['/orders/./42'], ['/orders/x/%2E%2E/42']])(
    "with scope 'resource', refuses a stale token on %s after the newer holder wrote /orders/42",
    async (alias) => {
      fresh({ scope: 'resource' });
      expect(await put('/orders/42', '11')).toBe(200);
      expect(await put(alias, '10')).toBe(409);
      expect(writes).toEqual(['/orders/42 11']);
    },
  );

  it('does not let the next request in while an abandoned handler may still be writing', async () => {
    fresh();
    const ac = new AbortController();
    const abandoned = fetch(`${base}/orders/7`, {
      method: 'PUT',
      headers: { 'fencing-token': '8', 'x-hold-ms': '400' },
      signal: ac.signal,
    }).catch(() => 'aborted');
    await sleep(30);
    ac.abort();
    expect(await abandoned).toBe('aborted');
    await sleep(100); // past abandonAfterMs: the handler with token 8 is still writing
    expect(await put('/orders/7', '9')).toBe(200);
    await sleep(400);
    // The newer holder's write must be the last one: nothing of token 8 may land after it.
    expect(writes).toEqual(['/orders/7 8', '/orders/7 9']);
  });

  it("with scope 'resource' and caseInsensitive, refuses a stale token on /Orders/42", async () => {
    fresh({ scope: 'resource', caseInsensitive: true });
    expect(await put('/orders/42', '11')).toBe(200);
    expect(await put('/Orders/42', '10')).toBe(409);
    fresh({ scope: 'resource' }); // case-sensitive by default: another resource
    expect(await put('/orders/42', '11')).toBe(200);
    expect(await put('/Orders/42', '10')).toBe(200);
  });

  it('lets requests with the same token overlap, and makes another token wait for all of them', async () => {
    fresh();
    const t0 = performance.now();
    const [a, b] = await Promise.all([put('/x', '5', 150), put('/y', '5', 150)]);
    expect([a, b]).toEqual([200, 200]);
    expect(performance.now() - t0).toBeLessThan(290); // together, not one after the other
    const slow = put('/x', '6', 100);
    await sleep(20);
    expect(await put('/y', '5')).toBe(409); // waited for 6, then stale
    expect(await slow).toBe(200);
    expect(writes.at(-1)).toBe('/x 6');
  });

  it('with abandonAfterMs, gives up on the handler, aborts its signal and still commits a late success', async () => {
    fresh({ abandonAfterMs: 50 });
    const ac = new AbortController();
    const abandoned = fetch(`${base}/orders/7`, {
      method: 'PUT',
      headers: { 'fencing-token': '8', 'x-hold-ms': '300' },
      signal: ac.signal,
    }).catch(() => 'aborted');
    for (let i = 0; i < 100 && book.inFlight('fencepost:lock:default') === 0; i++) await sleep(5);
    ac.abort();
    expect(await abandoned).toBe('aborted');
    await sleep(120);
    expect(book.inFlight('fencepost:lock:default')).toBe(0); // given up: the race is back (documented)
    expect(signals[0]?.aborted).toBe(true);
    expect(book.highWater('fencepost:lock:default')).toBeUndefined();
    await sleep(300);
    expect(writes).toEqual(['/orders/7 8']);
    expect(book.highWater('fencepost:lock:default')).toBe(8n); // its late success still counts
    expect(await put('/orders/7', '7')).toBe(409);
  });

  it('refuses contradictory options and reserved resource names', async () => {
    expect(() => httpGuard(new FenceBook(), { scope: 'lock', resource: () => 'x' })).toThrow(RangeError);
    expect(() => httpGuard(new FenceBook(), { scope: 'resource', lock: 'a' })).toThrow(RangeError);
    expect(() => httpGuard(new FenceBook(), { caseInsensitive: true })).toThrow(RangeError);
    expect(() => httpGuard(new FenceBook(), { abandonAfterMs: -1 })).toThrow(RangeError);
    fresh({ resource: () => 'fencepost:lock:default' });
    expect(await put('/a', '1')).toBe(400);
    expect(writes).toEqual([]);
  });
});

describe('normalizeResource', () => {
  it.each([
    ['/orders/42', '/orders/42'],
    ['/orders/42/', '/orders/42'],
    ['/orders//42//', '/orders/42'],
    ['/orders/%34%32', '/orders/42'],
    ['/%6Frders/4%32', '/orders/42'],
    ['/orders/./42', '/orders/42'],
    ['/orders/x/../42', '/orders/42'],
    ['/orders/x/%2e%2E/42', '/orders/42'],
    ['/orders\\42', '/orders/42'],
    ['/a%2fb', '/a%2Fb'],
    ['/a%2Fb', '/a%2Fb'],
    ['/a%3Fb', '/a%3Fb'],
    ['/a%25b', '/a%25b'],
    ['/caf%C3%A9', '/caf%C3%A9'],
    ['/café', '/caf%C3%A9'],
    ['/caf%c3%a9', '/caf%C3%A9'],
    ['/bad%FF', '/bad%FF'],
    ['/a%20b', '/a%20b'],
    ['/a b', '/a%20b'],
    ['/a%5Bb', '/a[b'],
    ['/', '/'],
    ['', '/'],
    ['/..', '/'],
  ])('%s → %s', (input, expected) => {
    expect(normalizeResource(input)).toBe(expected);
  });

  it('folds case only when asked', () => {
    expect(normalizeResource('/Orders/42')).toBe('/Orders/42');
    expect(normalizeResource('/Orders/42', { caseInsensitive: true })).toBe('/orders/42');
  });
});

describe('FenceBook.enter with tokens', () => {
  it('admits equal tokens together, queues others FIFO, and admits a queued run of one token together', async () => {
    const book = new FenceBook();
    const order: string[] = [];
    const a = await book.enter('/r', 5n);
    const b = await book.enter('/r', 5n); // same token: in at once
    expect(book.inFlight('/r')).toBe(2);
    const c = book.enter('/r', 6n).then((l) => (order.push('6'), l));
    const d = book.enter('/r', 5n).then((l) => (order.push('5 late'), l)); // behind 6: waits
    const e = book.enter('/r').then((l) => (order.push('exclusive'), l));
    await sleep(5);
    expect(order).toEqual([]);
    a();
    await sleep(5);
    expect(order).toEqual([]);
    b();
    (await c)();
    (await d)();
    (await e)();
    expect(order).toEqual(['6', '5 late', 'exclusive']);
    expect(book.inFlight('/r')).toBe(0);
  });
});
