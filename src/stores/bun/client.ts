/**
 * Bun's built-in Redis client (Bun.RedisClient, Bun ≥ 1.2.9) as the lock stores use it: for the
 * compiled agent (dist/bin/fencepost-agent), which runs on Bun and bundles no Redis library
 * (test/unit/cli/agent-bundle.test.ts), so that its `agent` and `exec` can hold Redis and Redlock
 * store locks with the very scripts the library runs through ioredis (stores/redis/connect.ts).
 *
 * Chosen as ioredis is configured there, for a lock: no offline queue (a command sent while
 * disconnected fails at once rather than arriving after its validity), reconnects in the
 * background, and every command bounded by COMMAND_TIMEOUT_MS (Bun's client has no per-command
 * timeout, so it is a timer here). Scripts go by EVALSHA and are re-sent with EVAL after NOSCRIPT.
 *
 * Only a single Redis endpoint (redis://, rediss://): Bun's client speaks neither Sentinel nor
 * Cluster, which the library on Node does.
 */
import { createHash } from 'node:crypto';
import { withTimeout } from '../../runtime/timeout.ts';
import { ChannelListeners } from '../channel-listeners.ts';
import type { Script } from '../store.ts';
import { StoreUrlError, type RedisTarget } from '../url.ts';

/** The part of Bun.RedisClient used here (Bun's own types are not a dependency of this project). */
interface BunRedisClient {
  readonly connected: boolean;
  connect(): Promise<void>;
  send(command: string, args: string[]): Promise<unknown>;
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  duplicate(): Promise<BunRedisClient>;
  close(): void;
}
interface BunRedisOptions {
  readonly connectionTimeout: number;
  readonly autoReconnect: boolean;
  readonly maxRetries: number;
  readonly enableOfflineQueue: boolean;
  readonly tls?: boolean;
}
interface BunRuntime {
  readonly RedisClient: new (url: string, options: BunRedisOptions) => BunRedisClient;
}

/** COMMAND_TIMEOUT_MS bounds one command, as stores/redis/connect.ts does for ioredis. */
export const COMMAND_TIMEOUT_MS = 2000;
const CONNECT_TIMEOUT_MS = 2000;

/** bunRuntime is Bun's global, or undefined on Node. */
export function bunRuntime(): BunRuntime | undefined {
  const bun = (globalThis as { Bun?: Partial<BunRuntime> }).Bun;
  return typeof bun?.RedisClient === 'function' ? (bun as BunRuntime) : undefined;
}

/** targetUrl is the URL Bun's client takes for `t`; Sentinel and Cluster targets are refused, naming `what`. */
export function targetUrl(t: RedisTarget, what: string): string {
  if (t.mode !== 'standalone')
    throw new StoreUrlError(
      what,
      `the compiled fencepost-agent speaks to one Redis (redis://, rediss://) or to Redlock masters; a ${t.mode === 'sentinel' ? 'Sentinel' : 'Cluster'} URL needs the fencepost library or \`fencepost exec\` on Node`,
    );
  const user = t.auth.username !== undefined ? encodeURIComponent(t.auth.username) : '';
  const pass = t.auth.password !== undefined ? `:${encodeURIComponent(t.auth.password)}` : '';
  const auth = user !== '' || pass !== '' ? `${user}${pass}@` : '';
  const host = t.endpoint.host.includes(':') ? `[${t.endpoint.host}]` : t.endpoint.host;
  return `${t.tls ? 'rediss' : 'redis'}://${auth}${host}:${t.endpoint.port}/${t.db}`;
}

/** BunConnection is one Redis: its scripts and its release channels. */
export class BunConnection {
  readonly name: string;
  readonly #client: BunRedisClient;
  #sub: Promise<BunRedisClient> | undefined;
  readonly #channels = new ChannelListeners(
    async (channel) => {
      const sub = await this.#subscriber();
      await withTimeout(
        sub.subscribe(channel, (message) => {
          this.#channels.deliver(channel, message);
        }),
        COMMAND_TIMEOUT_MS,
        this.name,
      );
    },
    async (channel) => {
      await (await this.#subscriber()).unsubscribe(channel);
    },
  );
  #connecting: Promise<void> | undefined;
  #closed = false;

  constructor(bun: BunRuntime, url: string, name: string) {
    this.name = name;
    this.#client = new bun.RedisClient(url, {
      connectionTimeout: CONNECT_TIMEOUT_MS,
      autoReconnect: true,
      maxRetries: 1_000_000_000, // for ever, in effect (Bun refuses larger values)
      enableOfflineQueue: false,
    });
  }

  /** ready resolves when connected, or after `ms` (never rejects: a Redis down is retried by the commands). */
  async ready(ms: number): Promise<void> {
    await withTimeout(this.#connect(), ms, this.name).catch(() => undefined);
  }

  #connect(): Promise<void> {
    if (this.#client.connected) return Promise.resolve();
    this.#connecting ??= this.#client.connect().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  async #send(command: string, args: string[]): Promise<unknown> {
    if (this.#closed) throw new Error(`${this.name}: closed`);
    try {
      return await withTimeout(
        (async () => {
          await this.#connect();
          return this.#client.send(command, args);
        })(),
        COMMAND_TIMEOUT_MS,
        this.name,
      );
    } catch (err) {
      throw new Error(`${this.name}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }

  /** script binds `lua` (EVALSHA, EVAL after NOSCRIPT). */
  script(lua: string, numberOfKeys: number): Script {
    const sha = createHash('sha1').update(lua).digest('hex');
    return async (keys, args) => {
      const rest = [String(numberOfKeys), ...keys, ...args];
      try {
        return await this.#send('EVALSHA', [sha, ...rest]);
      } catch (err) {
        if (!/NOSCRIPT/.test(err instanceof Error ? err.message : '')) throw err;
        return this.#send('EVAL', [lua, ...rest]);
      }
    };
  }

  /** listen calls `fn` on every message on `channel`; resolves once subscribed; returns the unsubscribe. */
  listen(channel: string, fn: (message: string) => void): Promise<() => void> {
    return this.#channels.listen(channel, fn);
  }

  /** #subscriber: a subscribing connection can send nothing else, so a second one, made on first use. */
  #subscriber(): Promise<BunRedisClient> {
    this.#sub ??= this.#client.duplicate();
    return this.#sub;
  }

  close(): void {
    this.#closed = true;
    this.#channels.clear();
    this.#client.close();
    void this.#sub?.then((s) => {
      s.close();
    });
  }
}
