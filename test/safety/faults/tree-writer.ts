/**
 * tree-writer.ts — a leaf of an `exec-tree` trial's process tree: the work a cron job's command
 * does, started (directly or through shells and pipelines) by `fencepost exec`. It writes to the
 * fenced store every INTERVAL ms with the token exec gave the tree (FENCEPOST_TOKEN), through the
 * same Redis guard and key layout as the safety workers, until it is stopped (at most MAX_WRITES).
 *
 * Its reports go to stderr, one JSON line each (worker-protocol.ts's shape plus `sentAt`, this
 * process's wall clock just before the write left): `tree` (its PID, at start), `attempt` and
 * `outcome`. stderr, not stdout: stdout may be a pipeline stage that dies first (`… | cat`), and a
 * write applied while its report was lost would read as a history that contradicts itself. Writes
 * to a pipe are synchronous in Node, so the attempt is reported before the write is sent.
 *
 * Environment: FENCEPOST_TOKEN (from exec), POD_NAME, POD_UID, SAFETY_STORE_URL, SAFETY_TRIAL,
 * SAFETY_PREFIX. Flags: --name N (unique in the tree), --ignore-term (SIGTERM is ignored: only
 * SIGKILL stops it), --token-var V (read the token from V instead: a multi-lock exec sets
 * FENCEPOST_TOKEN_<LOCK> for each lock and no FENCEPOST_TOKEN).
 */
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { redisGuard } from '../../../src/guards/redis-guard.ts';
import { storeValue } from '../history.ts';

const INTERVAL_MS = 100;
const MAX_WRITES = 600;

const { values } = parseArgs({
  strict: true,
  options: {
    name: { type: 'string' },
    'ignore-term': { type: 'boolean', default: false },
    'token-var': { type: 'string', default: 'FENCEPOST_TOKEN' },
  },
});
const env = (k: string): string => {
  const v = process.env[k];
  if (v === undefined || v === '') {
    process.stderr.write(`tree-writer: ${k} is not set\n`);
    process.exit(2);
  }
  return v;
};
const token = env(values['token-var']);
const trial = env('SAFETY_TRIAL');
const prefix = env('SAFETY_PREFIX');
const holder = `${env('POD_NAME')}/${env('POD_UID')}`;
const name = values.name ?? 'leaf';
if (values['ignore-term']) process.on('SIGTERM', () => undefined);
process.stdout.on('error', () => undefined); // a pipeline stage after us died: write on regardless

const report = (o: Record<string, unknown>): void => {
  process.stderr.write(`${JSON.stringify({ trial, holder, ...o })}\n`);
};
const store = new Redis(env('SAFETY_STORE_URL'), { maxRetriesPerRequest: 1 });
store.on('error', () => undefined);
const guard = redisGuard(store, { fenceKey: () => `${prefix}fence` });
report({ kind: 'tree', holder: '', token, detail: String(process.pid) });
for (let seq = 1; seq <= MAX_WRITES; seq++) {
  const writeId = `${env('POD_NAME')}.${name}-${process.pid}.${seq}`;
  report({
    kind: 'attempt',
    token,
    writeId,
    afterValidUntil: false,
    sentAt: performance.timeOrigin + performance.now(),
  });
  try {
    const r = await guard.write(`${prefix}w:${writeId}`, BigInt(token), storeValue(writeId, BigInt(token), holder));
    report({ kind: 'outcome', token, writeId, result: r.accepted ? 'accepted' : 'stale' });
  } catch (err) {
    report({
      kind: 'outcome',
      token,
      writeId,
      result: 'error',
      detail: err instanceof Error ? err.message : String(err),
    });
  }
  process.stdout.write(`${writeId}\n`);
  await sleep(INTERVAL_MS);
}
store.disconnect();
