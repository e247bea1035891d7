/**
 * A worker of the store-lock safety trials (test/safety/stores/), in a process of its own so that
 * the trial can pause it (SIGSTOP) as a GC pause or a VM stall would:
 *
 *   node store-worker.ts <store-url> <guard-redis-url> <lock> <ttl-ms> <data-key> <guard|plain>
 *
 * It takes the lock through the library (`acquire(lock, { store })`), and while it believes it
 * holds it writes `<data-key>` every few milliseconds with its token — through the Redis guard
 * (`guard`), or with a bare SET (`plain`, the calibration: no fencing) — checking `isHeld()` and
 * then writing, the window a pause falls into. It holds for a while, releases, and asks again.
 * `stale` on stdin writes once more with its last token whatever it believes (a process that
 * checked before it was paused); `quit` releases and exits. Every event is a line on stdout:
 * `granted <token> <ms>`, `lost <token> <ms>`, `released <token> <ms>`, `write <token> <applied>`.
 * Times are Date.now(): the trial's processes share one clock.
 */
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { acquire, connectStore, redisGuard, type HeldLock } from '../../../src/index.ts';

const [storeUrl = '', guardUrl = '', lock = '', ttl = '', dataKey = '', mode = 'guard'] = process.argv.slice(2);
const ttlMs = Number(ttl);
const say = (line: string): void => void process.stdout.write(`${line}\n`);
const store = await connectStore(storeUrl);
const data = new Redis(guardUrl);
const guard = redisGuard(data, { lock });
let quitting = false;
let last: bigint | undefined;
let current: HeldLock | undefined;

const write = async (token: bigint): Promise<void> => {
  const applied =
    mode === 'plain'
      ? (await data.set(dataKey, token.toString())) === 'OK'
      : (await guard.write(dataKey, token, token.toString())).accepted;
  say(`write ${token} ${applied}`);
};

const stdin = (async () => {
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'stale' && last !== undefined) await write(last);
    if (line === 'quit') break;
  }
  quitting = true;
})();

while (!quitting) {
  let held: HeldLock;
  try {
    held = await acquire(lock, { store, ttlMs, waitMs: 2000 });
  } catch {
    continue; // not granted within the wait: ask again
  }
  current = held;
  last = held.token;
  say(`granted ${held.token} ${Date.now()}`);
  held.signal.addEventListener('abort', () => {
    if (held.isHeld() === false && current === held) say(`lost ${held.token} ${Date.now()}`);
  });
  const until = Date.now() + 100 + Math.random() * 300;
  while (!quitting && Date.now() < until && held.isHeld()) {
    await sleep(3 + Math.random() * 10); // checked, then a moment before the write: a pause lands here
    await write(held.token);
    await sleep(2 + Math.random() * 5);
  }
  current = undefined;
  const wasHeld = held.isHeld();
  await held.release();
  if (wasHeld) say(`released ${held.token} ${Date.now()}`);
}
await stdin;
await store.close();
data.disconnect();
