/**
 * multi-key-worker.ts — the `multi-key` workload of a safety worker: instead of one new key per
 * write, the holder writes AND deletes over a shared set of MULTI_KEY_COUNT keys (`<prefix>k:<i>`),
 * through the Redis guard with one mark per lock (`redisGuard(store, { lock })`, the documented
 * default), and calls `advance(token)` once at the start of each term, before its first write. Each
 * round is check → think → op, as in the default workload; the op is a SET (the value names write
 * id, token and writer: `storeValue`) or a DEL, on a key drawn at random.
 *
 * Every op carries a write id that is its `storeValue` too: the guard's script adds it to the
 * lock's write id set (a ZADD right after the DEL, inside the same script), which is how the
 * store recorder attributes a DEL — a DEL names only its key.
 *
 * `keyScope: 'key'` (calibration only) is the guard as it was before the lock-wide mark: one mark
 * per data key, no `advance` (there is no lock mark to raise), and deletes as plain DELs (that
 * guard had no delete; a script here adds the same ZADD, so that the recorder still sees whose DEL
 * it was). A stale holder can then write a key the newer holder never wrote, and re-create one it
 * deleted.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { LockSession } from '../../src/agent/session.ts';
import { redisGuard } from '../../src/guards/redis-guard.ts';
import { storeValue } from './history.ts';
import type { JoinCommand, WorkerOutput } from './worker-protocol.ts';

/** MULTI_KEY_COUNT: the keys a multi-key trial writes and deletes. */
export const MULTI_KEY_COUNT = 8;
/** DELETE_SHARE: the share of ops that are DELs. */
export const DELETE_SHARE = 0.35;

/** PLAIN_DEL: an unfenced DEL plus the write id's ZADD (calibration `key-scope` only). */
const PLAIN_DEL = "redis.call('DEL', KEYS[1]); redis.call('ZADD', KEYS[2], 0, ARGV[1]); return 1";

/** multiKeyKey is the store key of key i of a trial. */
export function multiKeyKey(dataPrefix: string, i: number): string {
  return `${dataPrefix}k:${i}`;
}

/** multiKeyLoop runs the multi-key workload while `running()` says so. */
export async function multiKeyLoop(
  c: JoinCommand,
  session: LockSession,
  running: () => boolean,
  store: Redis,
  emit: (o: WorkerOutput) => void,
): Promise<void> {
  const holder = `${c.pod}/${c.uid}`;
  const perLock = (c.keyScope ?? 'lock') === 'lock';
  const guard = perLock ? redisGuard(store, { lock: c.dataPrefix }) : redisGuard(store, { scope: 'key' });
  let advanced: string | undefined;
  let seq = 0;
  while (running()) {
    const snap = session.snapshot();
    if (!snap.held || snap.token === undefined || snap.expiresInMs === undefined) {
      await sleep(c.intervalMs);
      continue;
    }
    if (perLock && advanced !== snap.token) {
      // A new term fences out every older token at once, before its first write.
      advanced = snap.token;
      await guard.advance(snap.token).catch(() => undefined);
    }
    const token = BigInt(snap.token);
    const validUntil = performance.now() + snap.expiresInMs;
    const writeId = `${c.pod}.${c.uid.slice(0, 8)}.${++seq}`;
    const op = Math.random() < DELETE_SHARE ? 'del' : 'set';
    const key = multiKeyKey(c.dataPrefix, Math.floor(Math.random() * MULTI_KEY_COUNT));
    const common = { trial: c.trial, holder, token: snap.token, writeId, op, key } as const;
    emit({ ...common, kind: 'check' });
    await sleep(c.thinkMs); // deciding → acting: a pause here leaves this process believing in `token`
    emit({ ...common, kind: 'attempt', afterValidUntil: performance.now() > validUntil });
    const id = storeValue(writeId, token, holder);
    try {
      if (op === 'del' && !perLock) {
        await store.eval(PLAIN_DEL, 2, key, `${c.dataPrefix}plain-dels`, id);
        emit({ ...common, kind: 'outcome', result: 'accepted' });
      } else {
        const r = op === 'set' ? await guard.write(key, token, id, id) : await guard.delete(key, token, id);
        emit({ ...common, kind: 'outcome', result: r.accepted ? 'accepted' : 'stale' });
      }
    } catch (err) {
      emit({ ...common, kind: 'outcome', result: 'error', detail: err instanceof Error ? err.message : String(err) });
    }
    await sleep(c.intervalMs);
  }
}
