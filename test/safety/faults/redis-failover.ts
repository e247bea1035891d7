/**
 * Redis failover to a lagging replica (the counter loses its latest INCRs), with real
 * redis-servers: a second server is made a replica of the token counter (`REPLICAOF`) over a TCP
 * proxy of ours, waits until it has caught up, and then its replication link is cut (the proxy
 * blackholes it). Grants made after the cut reach the primary only. Then the primary is SIGKILLed,
 * the replica promoted (`REPLICAOF NO ONE`) and the controller's counter proxy pointed at it: the
 * counter went back by every INCR since the cut, as after a Sentinel failover that lost
 * acknowledged writes. The etcd floor must keep the next token above every token issued (S1 checks
 * it); without the floor (calibration) tokens repeat.
 *
 * Why a proxy and not SIGSTOP on the replica: a stopped process's kernel still receives and
 * acknowledges the replication stream into its socket buffer, and the replica applies it when
 * resumed, even after the primary died, so it would not lag at all. Closing the blackholed proxy
 * drops what it held, as a network partition does.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';
import { startTcpProxy, type TcpProxy } from '../../support/testbed/tcp-proxy.ts';

/** LaggingReplica is a replica whose replication link has been cut; `promote` fails over to it. */
export interface LaggingReplica {
  readonly server: RedisServer;
  /** promote SIGKILLs `primary`, drops the held replication stream and makes the replica a primary. */
  promote(primary: RedisServer): Promise<void>;
  /** discard stops the replica and its link (when the failover did not happen). */
  discard(): Promise<void>;
}

function info(text: string, field: string): string | undefined {
  return new RegExp(`^${field}:(.*)$`, 'm').exec(text)?.[1]?.trim();
}

async function withClient<T>(server: RedisServer, fn: (c: Redis) => Promise<T>): Promise<T> {
  const c = server.client();
  c.on('error', () => undefined);
  try {
    return await fn(c);
  } finally {
    c.disconnect();
  }
}

/**
 * startLaggingReplica starts a replica of `primary`, waits (at most `timeoutMs`) until it has
 * everything the primary had when it was asked, then cuts its link: from then on it misses every write.
 */
export async function startLaggingReplica(primary: RedisServer, timeoutMs = 15_000): Promise<LaggingReplica> {
  const server = await startRedis();
  let link: TcpProxy | undefined;
  try {
    link = await startTcpProxy({ targetPort: primary.port });
    const linkPort = link.port;
    // A full sync otherwise waits 5 s for more replicas to join the same transfer.
    await withClient(primary, (c) => c.call('CONFIG', 'SET', 'repl-diskless-sync-delay', '0'));
    await withClient(server, (c) => c.call('REPLICAOF', '127.0.0.1', String(linkPort)));
    const target = await withClient(primary, async (c) =>
      Number(info(String(await c.call('INFO', 'replication')), 'master_repl_offset') ?? 'NaN'),
    );
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const text = await withClient(server, async (c) => String(await c.call('INFO', 'replication')));
      if (info(text, 'master_link_status') === 'up' && Number(info(text, 'slave_repl_offset') ?? '-1') >= target) break;
      if (performance.now() > deadline)
        throw new Error(`replica on ${server.port} did not catch up with ${primary.port} within ${timeoutMs} ms`);
      await sleep(20);
    }
    link.blackhole();
  } catch (err) {
    await link?.close();
    await server.stop();
    throw err;
  }
  const cut = link;
  return {
    server,
    async promote(p) {
      p.process().signal('SIGKILL');
      await p.process().exited;
      await cut.close(); // the replication bytes held since the cut are lost with the primary
      await withClient(server, (c) => c.call('REPLICAOF', 'NO', 'ONE'));
    },
    async discard() {
      await cut.close();
      await server.stop();
    },
  };
}
