/**
 * storeObserver — the StoreObserver port (store-locks.ts) over real stores: one reader per store
 * kind the controller was given a URL for (stores/observe.ts). A lock whose store has no URL reads
 * as unavailable, with the flag to set in the message (status: Ready=False, StoreUnavailable).
 */
import type { Logger } from '../../observability/logger.ts';
import { openStoreReader, type StoreReader } from '../../stores/observe.ts';
import { podOfOwner } from '../../stores/owner.ts';
import type { StoreKind, StoreObserver } from './store-locks.ts';

const FLAG: Record<StoreKind, string> = { Redis: '--redis-store-url', Redlock: '--redlock-store-url' };

/** openStoreObserver connects to the given stores (either may be absent). Errors name the flag. */
export async function openStoreObserver(
  urls: { readonly redis?: string | undefined; readonly redlock?: string | undefined },
  log: Logger,
): Promise<StoreObserver> {
  const readers = new Map<StoreKind, StoreReader>();
  try {
    if (urls.redis !== undefined) readers.set('Redis', await openStoreReader(urls.redis, FLAG.Redis));
    if (urls.redlock !== undefined) readers.set('Redlock', await openStoreReader(urls.redlock, FLAG.Redlock));
  } catch (err) {
    await Promise.all([...readers.values()].map((r) => r.close()));
    throw err;
  }
  for (const [kind, r] of readers) {
    if (r.kind !== (kind === 'Redis' ? 'redis' : 'redlock'))
      throw new TypeError(`${FLAG[kind]}: ${r.display} is a ${r.kind} URL`);
    log.info({ store: kind, url: r.display, ready: r.ready() }, 'Observing store locks');
  }
  return {
    async read(kind, namespace, name) {
      const r = readers.get(kind);
      if (r === undefined)
        return { ok: false, error: `the controller was started without ${FLAG[kind]}, so it cannot see this lock` };
      try {
        const o = await r.read(namespace, name);
        return {
          ok: true,
          owner: o.owner,
          ttlMs: o.ttlMs,
          token: o.token,
          pod: o.owner !== undefined ? podOfOwner(o.owner) : undefined,
        };
      } catch (err) {
        return { ok: false, error: err instanceof Error ? err.message : String(err) };
      }
    },
    onRelease(listener) {
      for (const r of readers.values())
        r.onRelease(listener).catch((err: unknown) => {
          log.warn(
            { err, store: r.display },
            'Could not subscribe to store lock releases; expiries and releases are told apart less well',
          );
        });
    },
    async close() {
      await Promise.all([...readers.values()].map((r) => r.close()));
    },
  };
}
