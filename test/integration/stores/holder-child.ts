/**
 * A store-lock holder in a process of its own, for tests that pause it (SIGSTOP):
 * `node holder-child.ts <store-url> <lock> <ttl-ms>` acquires the lock through the library and
 * prints `granted <token>`; when the lock's signal aborts it prints `lost <isHeld> <reason>`.
 * Each `write` line on stdin makes it write the key `account` through the Redis guard with its
 * token — whether or not it still holds the lock, as a process that checked before it was paused
 * would — and print `write accepted` or `write stale <mark>`. At the end of stdin it releases
 * and exits 0.
 */
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { acquire, redisGuard } from '../../../src/index.ts';

const [url = '', lock = '', ttl = ''] = process.argv.slice(2);
const held = await acquire(lock, { store: url, ttlMs: Number(ttl) });
process.stdout.write(`granted ${held.token}\n`);
held.signal.addEventListener('abort', () => {
  const reason: unknown = held.signal.reason;
  process.stdout.write(`lost ${held.isHeld()} ${reason instanceof Error ? reason.message : String(reason)}\n`);
});
const client = new Redis(url);
const guard = redisGuard(client, { lock });
for await (const line of createInterface({ input: process.stdin })) {
  if (line !== 'write') continue;
  const r = await guard.write('account', held.token, `written by ${held.token}`);
  process.stdout.write(r.accepted ? 'write accepted\n' : `write stale ${r.highWater}\n`);
}
await held.release();
client.disconnect();
