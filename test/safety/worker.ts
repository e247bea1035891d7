/**
 * worker.ts — one candidate pod's process in a safety trial: the library's lock session (the same
 * LockSession the agent sidecar and `acquire()` run) plus an application loop that writes to the
 * fenced store while the session says the lock is held. The runner pauses, kills and cuts off
 * this real process; nothing in it knows about faults.
 *
 * Each round is check → think → write: read the session (held? which token? how long valid?),
 * report `check`, wait `thinkMs` (the gap between deciding and acting, where a pause leaves a
 * stale believer), report `attempt`, send the write with the token seen at the check, report
 * the outcome. Every write goes to its own key (`<prefix>w:<writeId>`) through the Redis guard
 * with one shared fence key per lock (per permit for a Semaphore), so the final store content
 * shows every applied write.
 * With `fenced: false` (calibration) the write is a plain SET: the guard is gone.
 *
 * stdin: JSON commands, one a line — `join` (start a session for a trial's lock as a pod
 * incarnation) and `leave` (stop it, releasing the lock if asked). stdout: JSON events, one a
 * line, stamped by the runner on arrival (the reference clock), never by this process.
 */
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { LockSession } from '../../src/agent/session.ts';
import { connect } from '../../src/transport/connect.ts';
import { redisGuard } from '../../src/guards/redis-guard.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { realClock } from '../../src/runtime/clock.ts';
import type { JoinCommand, WorkerCommand, WorkerOutput } from './worker-protocol.ts';
import { storeValue } from './history.ts';
import { multiKeyLoop } from './multi-key-worker.ts';

const { values } = parseArgs({ strict: true, options: { kubeconfig: { type: 'string' }, store: { type: 'string' } } });
if (values.kubeconfig === undefined || values.store === undefined) {
  process.stderr.write('Usage: worker.ts --kubeconfig PATH --store redis://127.0.0.1:PORT\n');
  process.exit(2);
}
// The agent's own transport, as the sidecar and acquire() make it: one client for every session.
const api = connect(values.kubeconfig);
const store = new Redis(values.store, { maxRetriesPerRequest: 1 });
store.on('error', () => undefined); // a failed command rejects; the loop reports it

function emit(o: WorkerOutput): void {
  process.stdout.write(`${JSON.stringify(o)}\n`);
}

interface Running {
  readonly session: LockSession;
  stopped: boolean;
  loop: Promise<void>;
}
const trials = new Map<string, Running>();

/**
 * guardsOf: the trial's guards by fence key. A Semaphore is fenced per permit (its N holders write
 * at once with N tokens), any other lock with one mark.
 */
function guardsOf(c: JoinCommand): (permit: number | undefined) => ReturnType<typeof redisGuard> {
  const guards = new Map<string, ReturnType<typeof redisGuard>>();
  return (permit) => {
    const fence = permit === undefined ? `${c.dataPrefix}fence` : `${c.dataPrefix}fence:${permit}`;
    let g = guards.get(fence);
    if (g === undefined) {
      g = redisGuard(store, { fenceKey: () => fence });
      guards.set(fence, g);
    }
    return g;
  };
}

const around = (mean: number): number => mean * (0.5 + Math.random());

/**
 * semaphoreChurn: the semaphore workload's session side: ask for a permit; once held for about
 * holdMs, release it, wait about gapMs and ask again — so that permits change hands throughout.
 */
async function semaphoreChurn(c: JoinCommand, session: LockSession, running: () => boolean): Promise<void> {
  await session.request();
  while (running()) {
    const token = session.heldToken();
    if (token === undefined) {
      await sleep(c.intervalMs);
      continue;
    }
    await sleep(around(c.holdMs ?? 2000));
    if (!running()) return;
    if (session.heldToken() === token) await session.release().catch(() => undefined);
    await sleep(around(c.gapMs ?? 500));
    if (running()) await session.request().catch(() => undefined);
  }
}

async function writeLoop(c: JoinCommand, session: LockSession, running: () => boolean): Promise<void> {
  const holder = `${c.pod}/${c.uid}`;
  const guardFor = guardsOf(c);
  let seq = 0;
  while (running()) {
    const snap = session.snapshot();
    if (!snap.held || snap.token === undefined || snap.expiresInMs === undefined) {
      await sleep(c.intervalMs);
      continue;
    }
    const guard = guardFor(snap.permit);
    const token = BigInt(snap.token);
    const validUntil = performance.now() + snap.expiresInMs;
    const writeId = `${c.pod}.${c.uid.slice(0, 8)}.${++seq}`;
    emit({ trial: c.trial, kind: 'check', holder, token: snap.token, writeId });
    await sleep(c.thinkMs); // deciding → acting: a pause here leaves this process believing in `token`
    emit({
      trial: c.trial,
      kind: 'attempt',
      holder,
      token: snap.token,
      writeId,
      afterValidUntil: performance.now() > validUntil,
    });
    const key = `${c.dataPrefix}w:${writeId}`;
    const value = storeValue(writeId, token, holder);
    try {
      if (c.fenced) {
        const r = await guard.write(key, token, value);
        emit({
          trial: c.trial,
          kind: 'outcome',
          holder,
          token: snap.token,
          writeId,
          result: r.accepted ? 'accepted' : 'stale',
        });
      } else {
        await store.set(key, value);
        emit({ trial: c.trial, kind: 'outcome', holder, token: snap.token, writeId, result: 'accepted' });
      }
    } catch (err) {
      emit({
        trial: c.trial,
        kind: 'outcome',
        holder,
        token: snap.token,
        writeId,
        result: 'error',
        detail: err instanceof Error ? err.message : String(err),
      });
    }
    await sleep(c.intervalMs);
  }
}

async function join(c: JoinCommand): Promise<void> {
  const holder = `${c.pod}/${c.uid}`;
  const session = new LockSession({
    api,
    namespace: c.namespace,
    lock: c.lock,
    self: { name: c.pod, uid: c.uid },
    clock: realClock,
    log: silentLogger,
  });
  session.onEvent((e) => {
    emit({
      trial: c.trial,
      kind: e.type,
      holder,
      token: e.token,
      ...(e.reason !== undefined ? { reason: e.reason } : {}),
      ...(e.expiresInMs !== undefined ? { expiresInMs: e.expiresInMs } : {}),
    });
  });
  // A planned handover: reported like the session's events; half the time the "application"
  // answers early (POST …/drained does the same) after U[0, 200] ms, else the drain period runs out.
  session.onHandover((e) => {
    emit({ trial: c.trial, kind: e.type, holder, token: e.token });
    if (e.type === 'draining' && Math.random() < 0.5)
      setTimeout(() => void session.drained().catch(() => undefined), Math.random() * 200);
  });
  const r: Running = { session, stopped: false, loop: Promise.resolve() };
  trials.set(c.trial, r);
  await session.start();
  emit({ trial: c.trial, kind: 'joined', holder });
  r.loop =
    c.workload === 'multi-key'
      ? multiKeyLoop(c, session, () => !r.stopped, store, emit)
      : c.workload === 'semaphore'
        ? Promise.all([writeLoop(c, session, () => !r.stopped), semaphoreChurn(c, session, () => !r.stopped)]).then(
            () => undefined,
          )
        : writeLoop(c, session, () => !r.stopped);
}

async function leave(trial: string, release: boolean): Promise<void> {
  const r = trials.get(trial);
  if (r === undefined) {
    emit({ trial, kind: 'left', holder: '' });
    return;
  }
  r.stopped = true;
  await r.loop;
  if (release) await r.session.release().catch(() => undefined);
  await r.session.stop();
  trials.delete(trial);
  emit({ trial, kind: 'left', holder: '' });
}

createInterface({ input: process.stdin }).on('line', (line) => {
  let cmd: WorkerCommand;
  try {
    cmd = JSON.parse(line) as WorkerCommand;
  } catch {
    return;
  }
  const done = cmd.cmd === 'join' ? join(cmd) : leave(cmd.trial, cmd.release);
  done.catch((err: unknown) => {
    emit({ trial: cmd.trial, kind: 'failed', holder: '', detail: err instanceof Error ? err.message : String(err) });
  });
});
process.stdin.on('end', () => {
  process.exit(0);
});
process.on('SIGTERM', () => {
  store.disconnect();
  process.exit(0);
});
emit({ trial: '', kind: 'ready', holder: '' });
