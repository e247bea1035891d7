// Store URLs (src/stores/url.ts): each accepted form and what it connects to, and every refusal
// naming the option and the URL, with the password redacted.
import { describe, expect, it } from 'vitest';
import { parseStoreUrl, redact, StoreUrlError } from '../../../src/stores/url.ts';

describe('parseStoreUrl accepts', () => {
  it('redis:// with the default port and database', () => {
    expect(parseStoreUrl('redis://127.0.0.1', 'o')).toEqual({
      kind: 'redis',
      target: { mode: 'standalone', endpoint: { host: '127.0.0.1', port: 6379 }, db: 0, tls: false, auth: {} },
      display: 'redis://127.0.0.1',
    });
  });

  it('rediss:// with credentials, port and database; the display hides the password', () => {
    expect(parseStoreUrl('rediss://app:s%3Fcret@redis.example:6380/2', 'o')).toEqual({
      kind: 'redis',
      target: {
        mode: 'standalone',
        endpoint: { host: 'redis.example', port: 6380 },
        db: 2,
        tls: true,
        auth: { username: 'app', password: 's?cret' },
      },
      display: 'rediss://app:***@redis.example:6380/2',
    });
  });

  it('an IPv6 address in brackets', () => {
    const s = parseStoreUrl('redis://[::1]:7000', 'o');
    expect(s.kind === 'redis' && s.target.mode === 'standalone' && s.target.endpoint).toEqual({
      host: '::1',
      port: 7000,
    });
  });

  it('redis+sentinel:// with the master name and database (Sentinel port default 26379)', () => {
    expect(parseStoreUrl('redis+sentinel://:pw@s1,s2:26380/mymaster/1', 'o')).toEqual({
      kind: 'redis',
      target: {
        mode: 'sentinel',
        sentinels: [
          { host: 's1', port: 26379 },
          { host: 's2', port: 26380 },
        ],
        master: 'mymaster',
        db: 1,
        auth: { password: 'pw' },
      },
      display: 'redis+sentinel://:***@s1,s2:26380/mymaster/1',
    });
  });

  it('redis+cluster:// with seed nodes', () => {
    expect(parseStoreUrl('redis+cluster://n1:7000,n2:7001', 'o')).toMatchObject({
      kind: 'redis',
      target: {
        mode: 'cluster',
        nodes: [
          { host: 'n1', port: 7000 },
          { host: 'n2', port: 7001 },
        ],
      },
    });
  });

  it('redlock:// with five masters, each a standalone target sharing the credentials', () => {
    const s = parseStoreUrl('redlock://:pw@h1:1,h2:2,h3:3,h4:4,h5', 'o');
    expect(s.kind).toBe('redlock');
    if (s.kind !== 'redlock') return;
    expect(s.masters.map((m) => (m.mode === 'standalone' ? `${m.endpoint.host}:${m.endpoint.port}` : ''))).toEqual([
      'h1:1',
      'h2:2',
      'h3:3',
      'h4:4',
      'h5:6379',
    ]);
    expect(s.masters.every((m) => m.auth.password === 'pw')).toBe(true);
  });
});

describe('parseStoreUrl refuses, naming the option and the URL', () => {
  it.each([
    { url: 'localhost:6379', says: 'must be a URL such as redis://127.0.0.1:6379' },
    { url: 'http://h:1', says: 'scheme http:// is not a store' },
    { url: 'redis://', says: 'a host is missing' },
    { url: 'redis://h:0', says: 'port 0 is not in 1..65535' },
    { url: 'redis://h:70000', says: 'port 70000 is not in 1..65535' },
    { url: 'redis://h:x', says: '"h:x" is not a host name or address' },
    { url: 'redis://h1,h2', says: 'redis:// takes one host; for several masters use redlock://' },
    { url: 'redis://h/abc', says: 'database must be a number from 0 to 9999, not "abc"' },
    { url: 'redis://h?tls=1', says: 'takes no query or fragment' },
    { url: 'redis+sentinel://s1,s2', says: 'needs the master name as its path' },
    { url: 'redlock://h1,h2', says: 'needs at least 3 independent masters (5 is usual), not 2' },
    {
      url: 'redlock://h1,H1:6379,h3',
      says: "master h1:6379 is named twice; Redlock's majority needs distinct masters",
    },
    { url: 'redlock://h1,,h3', says: 'a host is missing' },
  ])('$url: $says', ({ url, says }) => {
    let err: unknown;
    try {
      parseStoreUrl(url, '--store');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(StoreUrlError);
    const message = (err as Error).message;
    expect(message.startsWith('--store: ')).toBe(true);
    expect(message).toContain(says);
    expect(message.endsWith(`, got ${JSON.stringify(url)}`)).toBe(true);
  });

  it('never shows the password of a URL it refuses', () => {
    expect(() => parseStoreUrl('redis://u:hunter2@h:99999', 'options.store')).toThrow(
      'options.store: port 99999 is not in 1..65535, got "redis://u:***@h:99999"',
    );
    expect(redact('redlock://:hunter2@a,b,c')).toBe('redlock://:***@a,b,c');
    expect(redact('redis://h:1')).toBe('redis://h:1');
  });
});
