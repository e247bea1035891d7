/**
 * The Node side of the cross-language store contention (test/support/store-contention.ts):
 * the library's acquire({ store }) and the TypeScript Redis guard, speaking the protocol every
 * language's worker speaks (clients/<lang> store workers):
 *
 *   node store-contention-worker.ts --store <url> --lock <name> --namespace <ns> --ttl-ms <n> --guard <redis-url> --rounds <n> --hold-ms <n>
 *
 * Once connected it says `ready` and waits for a line on stdin: the harness starts both workers'
 * rounds together, so that they contend from the first round however long each took to start.
 * Each round: acquire (wait up to 20 s) → `acquired`; INCR `<lock>:inside` on the guard Redis
 * (`overlap` unless the answer is 1); a fenced write of `<lock>:data` = the token through the
 * guard (lock-scoped mark of `<lock>`) → `write`; hold; DECR; release → `released`. Then `done`.
 * One JSON object per line on stdout.
 */
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { acquire, connectStore, redisGuard } from '../../src/index.ts';

const { values: a } = parseArgs({
  options: {
    store: { type: 'string' },
    lock: { type: 'string' },
    namespace: { type: 'string', default: 'default' },
    'ttl-ms': { type: 'string', default: '2000' },
    guard: { type: 'string' },
    rounds: { type: 'string', default: '5' },
    'hold-ms': { type: 'string', default: '20' },
    // Not part of the protocol: the harness's self-test runs this worker twice, under two names.
    'worker-name': { type: 'string', default: 'node' },
  },
});
const lock = a.lock ?? '';
const say = (o: Record<string, string>): void =>
  void process.stdout.write(`${JSON.stringify({ worker: a['worker-name'], ...o })}\n`);

const store = await connectStore(a.store ?? '');
const data = new Redis(a.guard ?? '');
const guard = redisGuard(data, { lock });
try {
  await data.ping();
  say({ event: 'ready' });
  const stdin = createInterface({ input: process.stdin });
  const [line] = (await Promise.race([once(stdin, 'line'), once(stdin, 'close')])) as [string | undefined];
  stdin.close();
  if (line === undefined) throw new Error('stdin closed before the start line');
  for (let r = 0; r < Number(a.rounds); r++) {
    const held = await acquire(lock, {
      store,
      namespace: a.namespace,
      ttlMs: Number(a['ttl-ms']),
      waitMs: 20_000,
    });
    const token = held.token.toString();
    say({ event: 'acquired', token });
    if ((await data.incr(`${lock}:inside`)) !== 1) say({ event: 'overlap', token });
    const w = await guard.write(`${lock}:data`, held.token, token);
    say({ event: 'write', token, outcome: w.accepted ? (w.duplicate ? 'duplicate' : 'applied') : 'stale' });
    await sleep(Number(a['hold-ms']));
    await data.decr(`${lock}:inside`);
    await held.release();
    say({ event: 'released', token });
  }
  say({ event: 'done' });
} catch (e) {
  say({ event: 'error', message: e instanceof Error ? e.message : String(e) });
  process.exitCode = 1;
} finally {
  await store.close();
  data.disconnect();
}
