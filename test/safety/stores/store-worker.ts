/**
 * A worker of the store-lock safety trials (test/safety/stores/), in a process of its own so that
 * the trial can pause it (SIGSTOP) as a GC pause or a VM stall would. One process serves trial
 * after trial (starting a Node process costs about a second of CPU; a soak runs thousands of
 * trials on two cores):
 *
 *   node store-worker.ts <guard-redis-url> <worker-name>
 *
 * Commands on stdin, one a line:
 * - `start <id> <store-url> <lock> <ttl-ms> <data-key> <guard|plain>`: connect to the store (a
 *   redis:// or redlock:// URL, through the library's connectStore) and take the lock through the
 *   library (`acquire(lock, { store })`) again and again; while it believes it holds it, write
 *   `<data-key>` every few milliseconds with its token — through the Redis guard (`guard`), or
 *   with a bare SET (`plain`, the calibration: no fencing) — checking `isHeld()` and then writing,
 *   the window a pause falls into. It holds for a while, releases, and asks again.
 * - `stale`: write once more with the trial's last token whatever it believes (a process that
 *   checked before it was paused).
 * - `end`: stop asking, release, close the store, answer `done <id>`.
 * - `quit`: exit (after ending a trial still running).
 * Every event is a line on stdout: `granted <token> <ms> <asked-ms>` (asked: when it began to
 * ask for that grant), `lost <token> <ms>`, `released <token> <ms>`, `write <token> <applied>`, `done <id>`. Times are Date.now(): the trial's processes share
 * one clock (only the redis-servers of a clock-jump trial run under faketime). The value written
 * is `<token>:<worker-name>`, so that the store's own log (MONITOR) says who wrote it.
 */
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { acquire, connectStore, redisGuard, type HeldLock } from '../../../src/index.ts';

const [guardUrl = '', name = 'w'] = process.argv.slice(2);
const say = (line: string): void => void process.stdout.write(`${line}\n`);
const data = new Redis(guardUrl);

interface Trial {
  readonly id: string;
  readonly ended: AbortController;
  /** last: the trial's last granted token (what `stale` writes with). */
  last: bigint | undefined;
  /** pending: a `stale` write in flight; `end` waits for it. */
  pending: Promise<void>;
  write(token: bigint): Promise<void>;
  loop: Promise<void>;
  /** done: set by the first `end` (a `start` also ends the trial before it), so a trial ends once. */
  done?: Promise<void>;
}

function startTrial(id: string, storeUrl: string, lock: string, ttlMs: number, dataKey: string, mode: string): Trial {
  const ended = new AbortController();
  const guard = redisGuard(data, { lock });
  const write = async (token: bigint): Promise<void> => {
    const value = `${token}:${name}`;
    const applied =
      mode === 'plain'
        ? (await data.set(dataKey, value)) === 'OK'
        : (await guard.write(dataKey, token, value)).accepted;
    say(`write ${token} ${applied}`);
  };
  const trial: Trial = { id, ended, last: undefined, pending: Promise.resolve(), write, loop: Promise.resolve() };
  const loop = async (): Promise<void> => {
    const store = await connectStore(storeUrl, { waitMs: 1000 });
    let current: HeldLock | undefined;
    try {
      while (!ended.signal.aborted) {
        let held: HeldLock;
        // When this worker started asking: a grant reported before it must have a smaller token.
        const askedAt = Date.now();
        try {
          held = await acquire(lock, { store, ttlMs, waitMs: 2000, signal: ended.signal });
        } catch {
          // Not granted within the wait, the store down (a restart, a failover), or the trial
          // ended: ask again, without spinning on a store that refuses at once.
          await sleep(20);
          continue;
        }
        current = held;
        trial.last = held.token;
        say(`granted ${held.token} ${Date.now()} ${askedAt}`);
        // Each term ends in exactly one line: `lost` when the lock went while the worker held it
        // (the abort, or isHeld() false first — it compares the deadline itself, before the
        // abort's timer has run), `released` when the worker let it go.
        let reported = false;
        const lost = (): void => {
          if (reported) return;
          reported = true;
          say(`lost ${held.token} ${Date.now()}`);
        };
        held.signal.addEventListener('abort', () => {
          if (held.isHeld() === false && current === held) lost();
        });
        const until = Date.now() + 100 + Math.random() * 300;
        while (!ended.signal.aborted && Date.now() < until && held.isHeld()) {
          await sleep(3 + Math.random() * 10); // checked, then a moment before the write: a pause lands here
          await write(held.token);
          await sleep(2 + Math.random() * 5);
        }
        const wasHeld = held.isHeld();
        if (!wasHeld) lost();
        current = undefined;
        // The belief ends here, when the worker stops writing — not when the release's round trip
        // returns (a release to a store that is down or restarting can take its command timeout).
        const stoppedAt = Date.now();
        // A release that fails (the store down) leaves the key to expire; the worker goes on.
        await held.release().catch((err: unknown) => void process.stderr.write(`release: ${String(err)}\n`));
        if (wasHeld && !reported) {
          reported = true;
          say(`released ${held.token} ${stoppedAt}`);
        }
      }
    } finally {
      await store.close();
    }
  };
  trial.loop = loop().catch((err: unknown) => void process.stderr.write(`${String(err)}\n`));
  return trial;
}

let trial: Trial | undefined;
const end = async (): Promise<void> => {
  const t = trial;
  if (t === undefined) return;
  t.done ??= (async () => {
    t.ended.abort();
    await t.loop;
    await t.pending;
    if (trial === t) trial = undefined;
    say(`done ${t.id}`);
  })();
  await t.done;
};

for await (const line of createInterface({ input: process.stdin })) {
  const [cmd, ...args] = line.trim().split(' ');
  if (cmd === 'start') {
    await end();
    const [id = '', storeUrl = '', lock = '', ttl = '', dataKey = '', mode = 'guard'] = args;
    trial = startTrial(id, storeUrl, lock, Number(ttl), dataKey, mode);
  } else if (cmd === 'stale') {
    const t = trial;
    const token = t?.last;
    if (t !== undefined && token !== undefined)
      t.pending = t.pending
        .then(() => t.write(token))
        .catch((err: unknown) => void process.stderr.write(`stale write: ${String(err)}\n`));
  } else if (cmd === 'end') {
    // Not awaited here: the loop must keep reading (a `stale` may follow while ending).
    void end();
  } else if (cmd === 'quit') break;
}
await end();
data.disconnect();
