/**
 * ioredis clients for a parsed store URL (stores/url.ts): one Redis, a Sentinel-managed master
 * or a Cluster. Options chosen for a lock, where a late answer is worth less than none:
 *
 * - no offline queue: a command sent while disconnected fails at once instead of waiting for a
 *   reconnect and arriving after its validity (the waiter retries; the watchdog retries until
 *   the validity passes);
 * - a bound on every script call (defineScript), so that a master that stopped answering
 *   (SIGSTOP, a partition) fails the call rather than holding it. Not ioredis's commandTimeout on
 *   the lock connections: it costs about 14 µs per command (measured in an acquire+release loop
 *   against node-redlock, whose clients have none), more than the rest of the hold's bookkeeping;
 *   one timer around the call costs nothing measurable. Release subscribers keep it
 *   (SUBSCRIBER_OPTIONS: not on a lock's round trip), and so do Cluster clients (set per node in
 *   redisOptions; not measured), whose scripts are then bounded twice;
 * - reconnects in the background, 50 ms doubling to 1 s, for ever: a master that comes back is
 *   used again.
 */
import { Cluster, Redis } from 'ioredis';
import type { Script } from '../store.ts';
import type { RedisTarget } from '../url.ts';

/** RedisClient is what the stores use of ioredis: a Redis or a Cluster. */
export type RedisClient = Redis | Cluster;

/** COMMAND_TIMEOUT_MS bounds one command: a lock's round trip that takes longer is as good as lost. */
export const COMMAND_TIMEOUT_MS = 2000;

/**
 * SUBSCRIBER_OPTIONS: what a release subscriber (a duplicate of a standalone or Sentinel client)
 * changes: the offline queue, so that a SUBSCRIBE sent while it still connects waits rather than
 * fails; and ioredis's command timeout, since its commands do not go through defineScript.
 */
export const SUBSCRIBER_OPTIONS = { enableOfflineQueue: true, commandTimeout: COMMAND_TIMEOUT_MS } as const;

const common = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  connectTimeout: 2000,
  retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 5), 1000),
};

/** connectTarget makes a client for `t` (it connects in the background; see {@link whenReady}). */
export function connectTarget(t: RedisTarget): RedisClient {
  const auth = {
    ...(t.auth.username !== undefined ? { username: t.auth.username } : {}),
    ...(t.auth.password !== undefined ? { password: t.auth.password } : {}),
  };
  const client: RedisClient =
    t.mode === 'standalone'
      ? new Redis({
          ...common,
          ...auth,
          host: t.endpoint.host,
          port: t.endpoint.port,
          db: t.db,
          ...(t.tls ? { tls: { servername: t.endpoint.host } } : {}),
        })
      : t.mode === 'sentinel'
        ? new Redis({
            ...common,
            ...auth,
            sentinels: t.sentinels.map((e) => ({ host: e.host, port: e.port })),
            name: t.master,
            db: t.db,
            // After a failover: follow the Sentinels' +switch-master at once, and treat a READONLY
            // answer (the old master, now a replica) as a reason to ask the Sentinels again.
            // Without both, renews went on to the old master, and the lock was lost on the new
            // one (redis-topologies.test.ts, "a failover while the lock is held").
            failoverDetector: true,
            reconnectOnError: (err: Error) => (err.message.startsWith('READONLY') ? 2 : false),
          })
        : new Cluster(
            t.nodes.map((e) => ({ host: e.host, port: e.port })),
            {
              enableOfflineQueue: false,
              clusterRetryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 5), 1000),
              redisOptions: {
                ...auth,
                maxRetriesPerRequest: 0,
                connectTimeout: 2000,
                commandTimeout: COMMAND_TIMEOUT_MS,
              },
            },
          );
  // Connection errors surface as failed commands (and are retried there); the 'error' event
  // would otherwise be an unhandled one. The last one is kept to explain those failures.
  client.on('error', (err: Error) => lastErrors.set(client, err.message));
  client.on('ready', () => lastErrors.delete(client));
  return client;
}

const lastErrors = new WeakMap<RedisClient, string>();

/**
 * failure explains a failed command: while disconnected, ioredis says only that the stream is not
 * writeable; the connection's own last error (ECONNREFUSED, a timeout, NOAUTH) says why.
 */
export function failure(client: RedisClient, where: string, err: unknown): Error {
  const own = err instanceof Error ? err.message : String(err);
  const why = client.status !== 'ready' ? (lastErrors.get(client) ?? own) : own;
  return new Error(`${where}: ${client.status !== 'ready' ? `not connected (${why})` : why}`, { cause: err });
}

/** whenReady resolves when `client` is ready or `ms` have passed, whichever is first (never rejects). */
export function whenReady(client: RedisClient, ms: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      client.off('ready', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    client.once('ready', done);
  });
}

export type { Script } from '../store.ts';

/**
 * defineScript registers `lua` on `client` under `name` (once per client) and returns a caller whose
 * errors name `where`. Each call is bounded by COMMAND_TIMEOUT_MS, unless `bound` is false: for a
 * caller that bounds every call itself (a Redlock master's, in redlock/quorum.ts ask, at 500 ms).
 */
export function defineScript(
  client: RedisClient,
  name: string,
  numberOfKeys: number,
  lua: string,
  where: string,
  bound = true,
): Script {
  if (!(name in client)) client.defineCommand(name, { numberOfKeys, lua });
  const command: unknown = Reflect.get(client, name);
  if (typeof command !== 'function') throw new Error(`ioredis did not define the command ${name}`);
  const call = (keys: readonly string[], args: readonly string[]): Promise<unknown> =>
    Promise.resolve((command as (...a: string[]) => unknown).call(client, ...keys, ...args));
  if (!bound)
    return (keys, args) =>
      call(keys, args).catch((err: unknown) => {
        throw failure(client, where, err);
      });
  // One promise and one timer per call, the error named where it settles: on the path of every
  // acquire and release, each further promise in the chain is another turn of the microtask queue.
  return (keys, args) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(failure(client, where, new Error(`${name}: no answer within ${COMMAND_TIMEOUT_MS} ms`)));
      }, COMMAND_TIMEOUT_MS);
      call(keys, args).then(
        (reply) => {
          clearTimeout(timer);
          resolve(reply);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(failure(client, where, err));
        },
      );
    });
}
