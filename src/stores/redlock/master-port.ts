/**
 * One Redlock master's part of one lock (redlock/quorum.ts MasterPort) over its scripts, whichever
 * client runs them: ioredis (redlock/masters.ts) or Bun's built-in client (stores/bun/). The reply
 * parsing lives here once.
 */
import { parseToken } from '../../protocol/token.ts';
import type { LockKeys } from '../redis/keys.ts';
import type { Script } from '../store.ts';
import type { MasterPort } from './quorum.ts';

/** MasterScripts: one master's scripts bound to its client, and its release channels. */
export interface MasterScripts {
  readonly name: string;
  readonly acquire: Script;
  readonly raise: Script;
  readonly renew: Script;
  readonly release: Script;
  listen(channel: string, fn: (message: string) => void): Promise<() => void>;
}

/** masterPort is the lock `keys` on master `m`. */
export function masterPort(m: MasterScripts, keys: LockKeys): MasterPort {
  return {
    name: m.name,
    async acquire(owner, ttlMs, floor) {
      const reply = await m.acquire([keys.holder, keys.counter, keys.epoch], [owner, String(ttlMs), floor.toString()]);
      if (!Array.isArray(reply)) throw new Error(`${m.name}: unexpected reply ${String(reply)}`);
      const [took, value, existed, epochChanged] = reply as unknown[];
      if (took !== 1) return { ok: false, heldForMs: typeof value === 'number' ? value : -1 };
      return {
        ok: true,
        counter: parseToken(value, `counter ${keys.counter} on ${m.name}`),
        existed: existed === 1,
        epochChanged: epochChanged === 1,
      };
    },
    async raise(owner, token) {
      return (await m.raise([keys.holder, keys.counter], [owner, token.toString()])) === 1;
    },
    async renew(owner, ttlMs) {
      return (await m.renew([keys.holder], [owner, String(ttlMs)])) === 1;
    },
    async release(owner) {
      await m.release([keys.holder], [owner, keys.channel]);
    },
    subscribe: (onRelease) => m.listen(keys.channel, onRelease),
  };
}
