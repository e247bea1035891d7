import { X509Certificate, createPrivateKey } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  ACCESS_REVIEW_PATH,
  TOKEN_REVIEW_PATH,
  metricsAuthorizer,
  type AccessRequest,
} from '../../../src/observability/metrics-auth.ts';
import { selfSignedCertificate } from '../../../src/observability/serving-cert.ts';

/** fakeApi answers reviews: tokens it knows name users; `allowed` users may get /metrics. */
function fakeApi(users: Record<string, string>, allowed: Set<string>) {
  const calls: string[] = [];
  let fail: Error | undefined;
  const review = (path: string, body: unknown): Promise<unknown> => {
    calls.push(path);
    if (fail !== undefined) return Promise.reject(fail);
    const b = body as {
      spec: { token?: string; user?: string; nonResourceAttributes?: { path: string; verb: string } };
    };
    if (path === TOKEN_REVIEW_PATH) {
      const user = users[b.spec.token ?? ''];
      return Promise.resolve({ status: user !== undefined ? { authenticated: true, user: { username: user } } : {} });
    }
    const attrs = b.spec.nonResourceAttributes;
    return Promise.resolve({
      status: {
        allowed: allowed.has(b.spec.user ?? '') && attrs?.path === '/metrics' && attrs.verb === 'get',
      },
    });
  };
  return {
    review,
    calls,
    failWith(e: Error | undefined) {
      fail = e;
    },
  };
}

const get = (token?: string): AccessRequest => ({
  method: 'GET',
  path: '/metrics',
  authorization: token !== undefined ? `Bearer ${token}` : undefined,
});

describe('metricsAuthorizer', () => {
  it.each([
    ['no Authorization header', undefined, 401],
    ['a Basic header', 'Basic dXNlcjpwdw==', 401],
  ])('answers 401 to %s without asking the API server', async (_name, authorization, status) => {
    const api = fakeApi({}, new Set());
    const check = metricsAuthorizer({ review: api.review });
    expect((await check({ method: 'GET', path: '/metrics', authorization })).status).toBe(status);
    expect(api.calls).toEqual([]);
  });

  it('answers 401 to an unknown token, 403 to a user without the right, 200 to one with it', async () => {
    const api = fakeApi({ a: 'alice', b: 'bob' }, new Set(['alice']));
    const check = metricsAuthorizer({ review: api.review });
    expect(await check(get('x'))).toMatchObject({ status: 401 });
    expect(await check(get('b'))).toEqual({
      status: 403,
      message: 'Forbidden: user "bob" cannot get path "/metrics"',
    });
    expect(await check(get('a'))).toEqual({ status: 200, user: 'alice' });
    expect(await check({ ...get('a'), method: 'POST' })).toMatchObject({ status: 403 });
  });

  it('reuses each decision until its TTL, then asks again', async () => {
    let now = 0;
    const api = fakeApi({ a: 'alice', b: 'bob' }, new Set(['alice']));
    const check = metricsAuthorizer({
      review: api.review,
      authnTtlMs: 1000,
      allowTtlMs: 5000,
      denyTtlMs: 300,
      now: () => now,
    });
    await check(get('a'));
    await check(get('b'));
    expect(api.calls).toHaveLength(4);
    now = 299;
    await check(get('a'));
    await check(get('b'));
    expect(api.calls).toHaveLength(4); // all cached
    now = 300; // bob's denial expired; his token's authentication did not
    await check(get('b'));
    expect(api.calls.slice(4)).toEqual([ACCESS_REVIEW_PATH]);
    now = 1000; // alice's token expired, her allowance did not
    await check(get('a'));
    expect(api.calls.slice(5)).toEqual([TOKEN_REVIEW_PATH]);
    now = 5000; // both expired: the token's (renewed at 1000) and the allowance
    await check(get('a'));
    expect(api.calls.slice(6)).toEqual([TOKEN_REVIEW_PATH, ACCESS_REVIEW_PATH]);
  });

  it('answers 500 when the API server cannot be asked, and caches nothing of it', async () => {
    const api = fakeApi({ a: 'alice' }, new Set(['alice']));
    const check = metricsAuthorizer({ review: api.review });
    api.failWith(new Error('connect ECONNREFUSED'));
    expect(await check(get('a'))).toEqual({ status: 500, message: 'Authorization failed: connect ECONNREFUSED' });
    api.failWith(undefined);
    expect(await check(get('a'))).toMatchObject({ status: 200 });
  });

  it('keeps at most maxEntries decisions, dropping the oldest', async () => {
    const api = fakeApi({ a: 'alice', b: 'bob', c: 'carol' }, new Set(['alice', 'bob', 'carol']));
    const check = metricsAuthorizer({ review: api.review, maxEntries: 2 });
    for (const t of ['a', 'b', 'c']) await check(get(t));
    const n = api.calls.length;
    await check(get('c'));
    expect(api.calls.length).toBe(n);
    await check(get('a')); // dropped: asked again
    expect(api.calls.length).toBe(n + 2);
  });
});

describe('selfSignedCertificate', () => {
  it('makes a P-256 certificate signed by its own key, for the names and addresses given, valid for a year', () => {
    const now = new Date('2026-12-07T00:00:00Z');
    const c = selfSignedCertificate({ commonName: 'ctl-metrics', hosts: ['ctl-0', '127.0.0.1', '::1'], now });
    const x = new X509Certificate(c.cert);
    expect(x.subject).toBe('CN=ctl-metrics');
    expect(x.issuer).toBe('CN=ctl-metrics');
    expect(x.verify(x.publicKey)).toBe(true);
    expect(x.checkPrivateKey(createPrivateKey(c.key))).toBe(true);
    expect(x.subjectAltName).toBe('DNS:ctl-0, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
    expect([x.checkHost('ctl-0'), x.checkIP('127.0.0.1'), x.checkIP('::1')]).toEqual(['ctl-0', '127.0.0.1', '::1']);
    expect(x.ca).toBe(false);
    expect(x.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1']);
    expect(new Date(x.validFrom).toISOString()).toBe('2026-12-06T23:00:00.000Z');
    expect(new Date(x.validTo).toISOString()).toBe('2027-12-07T00:00:00.000Z');
    expect(x.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
  });
});
