/**
 * Store URLs, parsed and checked before anything connects (pure; test/unit/stores/url.test.ts):
 *
 *   redis://[[user]:password@]host[:port][/db]           one Redis (rediss:// for TLS)
 *   redis+sentinel://[[user]:password@]h1:p1,h2:p2/master[/db]   a Sentinel-managed master
 *   redis+cluster://[[user]:password@]h1:p1,h2:p2        a Redis Cluster (seed nodes)
 *   redlock://[[user]:password@]h1:p1,h2:p2,h3:p3[/db]  Redlock over N independent masters (N ≥ 3)
 *   redis+shards://[[user]:password@]h1:p1,h2:p2[/db][?previous=h1:p1,h3:p3]
 *                                                        several Redis, each lock on one of them by a
 *                                                        stable hash of namespace/name (stores/shards.ts);
 *                                                        `previous`: the set before a change, while it rolls out
 *
 * The default port is 6379 (26379 for Sentinels). Several hosts are a comma-separated list, which
 * WHATWG URL cannot parse, so the parsing is by hand. Errors name the option (`what`) and the URL
 * with its password replaced by `***`: an error message ends up in logs.
 */

/** Endpoint is one host and port. */
export interface Endpoint {
  readonly host: string;
  readonly port: number;
}

/** Auth is the credentials from the URL's user info. */
export interface Auth {
  readonly username?: string;
  readonly password?: string;
}

/** RedisTarget is one Redis deployment, as ioredis connects to it (stores/redis/connect.ts). */
export type RedisTarget =
  | {
      readonly mode: 'standalone';
      readonly endpoint: Endpoint;
      readonly db: number;
      readonly tls: boolean;
      readonly auth: Auth;
    }
  | {
      readonly mode: 'sentinel';
      readonly sentinels: readonly Endpoint[];
      readonly master: string;
      readonly db: number;
      readonly auth: Auth;
    }
  | { readonly mode: 'cluster'; readonly nodes: readonly Endpoint[]; readonly auth: Auth };

/** StoreSpec is a parsed store URL; `display` is the URL with the password redacted. */
export type StoreSpec =
  | { readonly kind: 'redis'; readonly target: RedisTarget; readonly display: string }
  | {
      readonly kind: 'shards';
      readonly shards: readonly RedisTarget[];
      /** previous: the shard set before a change, while clients move over (stores/shards.ts). */
      readonly previous: readonly RedisTarget[] | undefined;
      readonly display: string;
    }
  | { readonly kind: 'redlock'; readonly masters: readonly RedisTarget[]; readonly display: string };

/** storeTargets: every Redis a store URL names (a shard named in both sets once per set). */
export function storeTargets(spec: StoreSpec): readonly RedisTarget[] {
  switch (spec.kind) {
    case 'redis':
      return [spec.target];
    case 'redlock':
      return spec.masters;
    case 'shards':
      return [...spec.shards, ...(spec.previous ?? [])];
  }
}

/** MIN_REDLOCK_MASTERS: with fewer than three, one master's failure stops every grant; use five. */
export const MIN_REDLOCK_MASTERS = 3;

/** StoreUrlError: a store URL was refused; the message names the option and the (redacted) URL. */
export class StoreUrlError extends TypeError {
  /** problem: the message without the option's name (for a CLI that prefixes the flag itself). */
  readonly problem: string;
  constructor(what: string, problem: string) {
    super(`${what}: ${problem}`);
    this.name = 'StoreUrlError';
    this.problem = problem;
  }
}

const SHAPE = /^([a-z][a-z0-9+.-]*):\/\/(?:([^@/?#]*)@)?([^/?#]*)(\/[^?#]*)?([?#].*)?$/i;
const HOST = /^(\[[0-9a-f:.]+\]|[a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/i;

/** parseStoreUrl parses `url` (see the module comment); `what` names the option in errors (`options.store`, `--store`). */
export function parseStoreUrl(url: string, what: string): StoreSpec {
  const display = redact(url);
  const fail = (problem: string): never => {
    throw new StoreUrlError(what, `${problem}, got ${JSON.stringify(display)}`);
  };
  const m = SHAPE.exec(url);
  if (m === null) return fail('must be a URL such as redis://127.0.0.1:6379 or redlock://h1:6379,h2:6379,h3:6379');
  const scheme = (m[1] ?? '').toLowerCase();
  const auth = parseAuth(m[2], fail);
  const path = (m[4] ?? '').replace(/^\//, '');
  const query = m[5];
  if (query !== undefined && !(scheme === 'redis+shards' && /^\?previous=[^&#]+$/.test(query)))
    fail(scheme === 'redis+shards' ? 'takes one query parameter, ?previous=h1:p1,h2:p2' : 'takes no query or fragment');
  const hosts = (m[3] ?? '').split(',');
  const defaultPort = scheme === 'redis+sentinel' ? 26379 : 6379;
  const endpoints = hosts.map((h) => parseEndpoint(h, defaultPort, fail));
  const db = (text: string): number => {
    if (text === '') return 0;
    if (!/^(0|[1-9][0-9]{0,3})$/.test(text))
      fail(`database must be a number from 0 to 9999, not ${JSON.stringify(text)}`);
    return Number(text);
  };
  const single = (): Endpoint => {
    const [only] = endpoints;
    if (only === undefined || endpoints.length !== 1)
      return fail(`${scheme}:// takes one host; for several masters use redlock://`);
    return only;
  };
  switch (scheme) {
    case 'redis':
    case 'rediss':
      if (path.includes('/')) fail('the path is the database number only');
      return {
        kind: 'redis',
        target: { mode: 'standalone', endpoint: single(), db: db(path), tls: scheme === 'rediss', auth },
        display,
      };
    case 'redis+sentinel': {
      const [master = '', dbText = '', ...rest] = path.split('/');
      if (master === '') fail('redis+sentinel:// needs the master name as its path: redis+sentinel://h1,h2/mymaster');
      if (rest.length > 0) fail('the path is /master[/db]');
      return {
        kind: 'redis',
        target: { mode: 'sentinel', sentinels: endpoints, master, db: db(dbText), auth },
        display,
      };
    }
    case 'redis+cluster':
      if (path !== '') fail('redis+cluster:// takes no path (a cluster has one database)');
      return { kind: 'redis', target: { mode: 'cluster', nodes: endpoints, auth }, display };
    case 'redlock': {
      if (path.includes('/')) fail('the path is the database number only');
      if (endpoints.length < MIN_REDLOCK_MASTERS)
        fail(
          `redlock:// needs at least ${MIN_REDLOCK_MASTERS} independent masters (5 is usual), not ${endpoints.length}`,
        );
      const seen = new Set<string>();
      for (const e of endpoints) {
        const key = `${e.host.toLowerCase()}:${e.port}`;
        if (seen.has(key)) fail(`master ${key} is named twice; Redlock's majority needs distinct masters`);
        seen.add(key);
      }
      const n = db(path);
      return {
        kind: 'redlock',
        masters: endpoints.map((endpoint) => ({ mode: 'standalone', endpoint, db: n, tls: false, auth })),
        display,
      };
    }
    case 'redis+shards': {
      if (path.includes('/')) fail('the path is the database number only');
      const n = db(path);
      const distinct = (list: readonly Endpoint[], which: string): void => {
        const seen = new Set<string>();
        for (const e of list) {
          const key = `${e.host.toLowerCase()}:${e.port}`;
          if (seen.has(key)) fail(`shard ${key} is named twice in ${which}`);
          seen.add(key);
        }
      };
      distinct(endpoints, 'the shards');
      const previous =
        query !== undefined
          ? query
              .slice('?previous='.length)
              .split(',')
              .map((h) => parseEndpoint(h, defaultPort, fail))
          : undefined;
      if (previous !== undefined) distinct(previous, 'previous');
      const target = (endpoint: Endpoint): RedisTarget => ({ mode: 'standalone', endpoint, db: n, tls: false, auth });
      return { kind: 'shards', shards: endpoints.map(target), previous: previous?.map(target), display };
    }
    default:
      return fail(
        `scheme ${scheme}:// is not a store; use redis://, rediss://, redis+sentinel://, redis+cluster://, redis+shards:// or redlock://`,
      );
  }
}

function parseAuth(info: string | undefined, fail: (p: string) => never): Auth {
  if (info === undefined || info === '') return {};
  const colon = info.indexOf(':');
  const decode = (s: string): string => {
    try {
      return decodeURIComponent(s);
    } catch {
      return fail('the user info is not valid percent-encoding');
    }
  };
  const username = decode(colon < 0 ? info : info.slice(0, colon));
  const password = colon < 0 ? undefined : decode(info.slice(colon + 1));
  return { ...(username !== '' ? { username } : {}), ...(password !== undefined ? { password } : {}) };
}

function parseEndpoint(text: string, defaultPort: number, fail: (p: string) => never): Endpoint {
  if (text === '') return fail('a host is missing');
  const m = /^(.*?)(?::([0-9]+))?$/.exec(text);
  const host = m?.[1] ?? '';
  if (!HOST.test(host)) return fail(`${JSON.stringify(host)} is not a host name or address`);
  const port = m?.[2] !== undefined ? Number(m[2]) : defaultPort;
  if (!Number.isInteger(port) || port < 1 || port > 65535) return fail(`port ${m?.[2] ?? ''} is not in 1..65535`);
  return { host: host.startsWith('[') ? host.slice(1, -1) : host, port };
}

/** redact replaces the password of a URL's user info with `***`. */
export function redact(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:@/?#]*:)[^@/?#]*@/i, '$1***@');
}
