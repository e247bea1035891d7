/**
 * Cross-language contention for one Redis-store lock: a Node worker (store-contention-worker.ts:
 * the TypeScript library) and a worker of another language's client run the same rounds against the
 * same lock, at the same time, each writing through its own language's Redis guard; the events of
 * both say whether the two agree on keys, scripts and tokens:
 * - both acquire, and they really contend: each worker says `ready` once connected and waits for a
 *   line on stdin, and the harness starts both when both are ready, so the first round is a race
 *   however long a JVM or a loaded machine took to start one of them;
 * - no `overlap` (an INCR of `<lock>:inside` answered more than 1: two holders at once);
 * - every token distinct, and each worker's tokens increasing;
 * - every fenced write applied (with mutual exclusion and one counter, every new holder's token
 *   is above every earlier one, so a `stale` means the two disagree about tokens).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { expect } from 'vitest';
import { spawnManaged, type ManagedProcess } from './testbed/processes.ts';

const NODE_WORKER = resolve(import.meta.dirname, 'store-contention-worker.ts');

/** ContentionEvent is one line of a worker. */
export interface ContentionEvent {
  readonly worker: string;
  readonly event: 'ready' | 'acquired' | 'overlap' | 'write' | 'released' | 'done' | 'error';
  readonly token?: string;
  readonly outcome?: 'applied' | 'stale' | 'duplicate';
  readonly message?: string;
}

/** ForeignWorker is how to start the other language's worker (the protocol's flags are appended). */
export interface ForeignWorker {
  readonly command: string;
  readonly args?: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
}

/** ContentionOptions: one run. */
export interface ContentionOptions {
  readonly foreign: ForeignWorker;
  readonly storeUrl: string;
  readonly guardUrl: string;
  readonly lock: string;
  readonly namespace?: string;
  readonly rounds?: number;
  readonly holdMs?: number;
  readonly ttlMs?: number;
  /** timeoutMs bounds the whole run (default 60 s): a hang fails instead of stalling the suite. */
  readonly timeoutMs?: number;
}

/** runStoreContention runs both workers to the end and returns every event, in arrival order. */
export async function runStoreContention(o: ContentionOptions): Promise<ContentionEvent[]> {
  const dir = mkdtempSync(join(tmpdir(), 'fencepost-contention-'));
  const flags = [
    '--store',
    o.storeUrl,
    '--lock',
    o.lock,
    '--namespace',
    o.namespace ?? 'default',
    '--ttl-ms',
    String(o.ttlMs ?? 2000),
    '--guard',
    o.guardUrl,
    '--rounds',
    String(o.rounds ?? 10),
    '--hold-ms',
    String(o.holdMs ?? 20),
  ];
  const events: ContentionEvent[] = [];
  let ready = 0;
  const procs: ManagedProcess[] = [
    spawnManaged(`contention-node-${o.lock}`, process.execPath, {
      args: [NODE_WORKER, ...flags],
      logFile: join(dir, 'node.log'),
      pipeStdio: true,
    }),
    spawnManaged(`contention-foreign-${o.lock}`, o.foreign.command, {
      args: [...(o.foreign.args ?? []), ...flags],
      logFile: join(dir, 'foreign.log'),
      pipeStdio: true,
      ...(o.foreign.env !== undefined ? { env: o.foreign.env } : {}),
      ...(o.foreign.cwd !== undefined ? { cwd: o.foreign.cwd } : {}),
    }),
  ];
  for (const p of procs) {
    // A worker that dies before the start line closes its stdin under us; its exit is the finding.
    p.stdin?.on('error', () => undefined);
    // One that exits before both are ready must not leave the other waiting for a start line.
    void p.exited.then(() => {
      if (ready < procs.length) for (const q of procs) q.stdin?.end();
    });
  }
  const read = procs.map(async (p) => {
    if (p.stdout === null) return;
    for await (const line of createInterface({ input: p.stdout })) {
      if (line.trim() === '') continue;
      let event: ContentionEvent;
      try {
        event = JSON.parse(line) as ContentionEvent;
      } catch {
        event = { worker: p.name, event: 'error', message: `not a JSON line: ${line}` };
      }
      events.push(event);
      // The start line goes to both at once, when the second of them is ready.
      if (event.event === 'ready' && ++ready === procs.length) for (const q of procs) q.stdin?.end('start\n');
    }
  });
  let timer: NodeJS.Timeout | undefined;
  const timeoutMs = o.timeoutMs ?? 60_000;
  try {
    await Promise.race([
      Promise.all([...read, ...procs.map((p) => p.exited)]),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`contention on ${o.lock} not done within ${timeoutMs} ms (logs in ${dir})`)),
          timeoutMs,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
    await Promise.all(procs.map((p) => p.stop(1000)));
  }
  rmSync(dir, { recursive: true, force: true });
  return events;
}

/** assertContention checks the events of one run (the module's doc says what and why). */
export function assertContention(events: readonly ContentionEvent[], foreignWorker: string): void {
  expect(events.filter((e) => e.event === 'error')).toEqual([]);
  expect(events.filter((e) => e.event === 'overlap')).toEqual([]);
  const workers = [...new Set(events.map((e) => e.worker))].toSorted();
  expect(workers).toEqual(['node', foreignWorker].toSorted());
  for (const w of workers) {
    expect(events.filter((e) => e.worker === w && e.event === 'ready')).toHaveLength(1);
    expect(events.filter((e) => e.worker === w && e.event === 'done')).toHaveLength(1);
  }
  const acquired = events.filter((e) => e.event === 'acquired');
  const tokens = acquired.map((e) => BigInt(e.token ?? '-1'));
  expect(new Set(tokens).size).toBe(tokens.length);
  for (const w of workers) {
    const mine = acquired.filter((e) => e.worker === w).map((e) => BigInt(e.token ?? '-1'));
    expect(mine.length).toBeGreaterThan(0);
    expect(mine).toEqual(mine.toSorted((x, y) => (x < y ? -1 : x > y ? 1 : 0)));
  }
  const writes = events.filter((e) => e.event === 'write');
  expect(writes).toHaveLength(acquired.length);
  expect(writes.filter((e) => e.outcome !== 'applied')).toEqual([]);
}
