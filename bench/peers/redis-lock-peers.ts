/**
 * The Redis lock libraries fencepost's Redis and Redlock stores are compared with, behind one
 * small interface: node-redlock (`redlock`, 5.0.0-beta.2, the version its README documents) and
 * `@sesamecare-oss/redlock` (its maintained fork). Both issue no fencing token.
 *
 * Waiting: both retry a refused acquire after `retryDelay` ± `retryJitter`; the benchmark sets
 * 10 ± 10 ms (their default is 200 ms, which would make every contended figure a sleep).
 */
import { Redlock as SesameRedlock } from '@sesamecare-oss/redlock';
import type { Redis } from 'ioredis';
import NodeRedlock from 'redlock';

/** HeldBenchLock is one granted lock of a compared implementation. */
export interface HeldBenchLock {
  /** token: the fencing token, when the implementation issues one. */
  readonly token: bigint | undefined;
  release(): Promise<void>;
}

/** BenchLockImpl is one lock implementation under test, on the clients it was made with. */
export interface BenchLockImpl {
  readonly name: string;
  /** masters: how many Redis servers it uses (1, or the Redlock quorum's N). */
  readonly masters: number;
  readonly issuesTokens: boolean;
  /** acquire takes `resource` for ttlMs, waiting (with the implementation's own retry) until granted. */
  acquire(resource: string, ttlMs: number): Promise<HeldBenchLock>;
}

/** RETRY: the peers' retry settings in the benchmark (see above). */
export const RETRY = { retryCount: -1, retryDelay: 10, retryJitter: 10 } as const;

/** RedlockLike: the part of both libraries' Redlock class the benchmark uses (their shapes agree). */
interface RedlockLike {
  on(event: 'error', listener: () => void): unknown;
  acquire(resources: string[], duration: number): Promise<{ release(): Promise<unknown> }>;
}

/** peer wraps one library's Redlock on `clients` (one client: the single-instance form). */
function peer(name: string, clients: readonly Redis[], r: RedlockLike): BenchLockImpl {
  r.on('error', () => undefined); // a refused attempt is reported here too; the retry handles it
  return {
    name,
    masters: clients.length,
    issuesTokens: false,
    acquire: async (resource, ttlMs) => {
      const lock = await r.acquire([resource], ttlMs);
      return {
        token: undefined,
        release: async () => {
          await lock.release();
        },
      };
    },
  };
}

/** nodeRedlock: node-redlock on `clients`. */
export function nodeRedlock(clients: readonly Redis[]): BenchLockImpl {
  return peer(
    'redlock (node-redlock 5.0.0-beta.2)',
    clients,
    new NodeRedlock(clients, { ...RETRY, driftFactor: 0.01 }),
  );
}

/** sesameRedlock: @sesamecare-oss/redlock on `clients`. */
export function sesameRedlock(clients: readonly Redis[]): BenchLockImpl {
  return peer('@sesamecare-oss/redlock 1.4.0', clients, new SesameRedlock(clients, { ...RETRY, driftFactor: 0.01 }));
}
