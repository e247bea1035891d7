/**
 * `fencepost exec --lock NAME [--lock NAME...] [--wait D] [--if-held P] [--grace D] -- CMD [ARGS...]`
 * — run CMD only while this pod holds the lock(s): acquire (in-process, with the pod identity
 * from the downward API — or, with `--store redis://…|redlock://…`, in that store, with no pod
 * identity or Kubernetes at all; several locks all or none, in one global order: client/lock-set.ts), run
 * CMD with FENCEPOST_LOCKS and FENCEPOST_TOKEN_<LOCK> (one lock: also FENCEPOST_LOCK and
 * FENCEPOST_TOKEN) in its environment (exec-flags.ts), renew while it runs, release when it exits
 * (in reverse order). CMD runs in a process group of its own (process-group.ts), and every signal
 * goes to the whole group: if any lock is lost, SIGTERM and, after the grace, SIGKILL reach the
 * shell of `sh -c` and the processes under it, including those still alive after CMD itself
 * exited. The grace is cut to end before the server could grant the lock again (lease duration −
 * renew deadline, of the shortest lock), and the requests exec makes after a loss (release,
 * complete) are aborted at the end of that window (HeldLock's request bounds): exec then exits
 * instead of waiting on an API server it cannot reach.
 * A planned handover of any lock (`kubectl fencepost handover`: the session reports draining) stops
 * the group the same way before the lock is released: SIGTERM, SIGKILL after the grace (cut to
 * end DRAIN_MARGIN_MS before the drain does), and only once the group is empty does exec answer
 * the handover (drained()) and release every lock, so the successor is granted after the old job
 * is gone. exec asks each session to hold a handover at least grace + DRAIN_MARGIN_MS
 * (acquire's minDrainMs), so a handover with a drain period of 0 waits for the job too.
 * Immediately before CMD starts exec checks that every lock is still held (against the clock) and
 * none is being handed over; otherwise CMD does not run, every lock is released, and exec exits
 * EXIT_NOT_ACQUIRED (acquire() already refuses a set with a lock lost while a later one was awaited).
 * SIGTERM, SIGINT, SIGHUP and SIGQUIT sent to exec are forwarded to the group. Processes CMD
 * leaves behind when it exits normally are stopped the same way before the lock is released.
 *
 * Exit codes: CMD's own (128 + signal number when it was killed by a signal), or
 *   EXIT_NOT_ACQUIRED (3): not granted within --wait (or held, with --if-held fail; or a lock lost
 *     or handed over before CMD started: CMD did not run);
 *   EXIT_LOST (4): a lock was lost, or handed over, while CMD ran (CMD was stopped);
 *   EXIT_ALREADY_DONE (5): --run-id was already reported completed (CMD did not run);
 *   EXIT_SKIPPED (6): --if-held skip, and another pod held a lock (CMD did not run);
 *   2: bad usage.
 */
import { StoreUrlError } from '../stores/url.ts';
import { constants } from 'node:os';
import {
  acquire,
  AlreadyDoneError,
  LockHeldError,
  NotAcquiredError,
  type HeldLock,
  type HeldLockSet,
} from '../client/acquire.ts';
import { NO_STORES, storesAvailable } from '../client/store-loader.ts';
import { UsageError } from '../config/usage-error.ts';
import { createLogger } from '../observability/logger.ts';
import type { TermTimings } from '../protocol/timings.ts';
import { commandEnv, parseExecArgs } from './exec-flags.ts';
import { EXIT_ALREADY_DONE, EXIT_LOST, EXIT_NOT_ACQUIRED, EXIT_SKIPPED } from './exec-usage.ts';
import { spawnGroup } from './process-group.ts';

export { EXIT_ALREADY_DONE, EXIT_LOST, EXIT_NOT_ACQUIRED, EXIT_SKIPPED } from './exec-usage.ts';

/**
 * DRAIN_MARGIN_MS: in a planned handover, how long before the drain's end exec SIGKILLs the
 * group at the latest, and what it adds to its grace as the shortest drain it asks the session
 * to hold: time for the kernel to tear the group down and for exec to see it empty and answer.
 */
export const DRAIN_MARGIN_MS = 500;

/**
 * ExecCalibration weakens exec for the safety suite's calibration runs only (test/safety/faults/):
 * `ignoreHandover` makes exec deaf to planned handovers, as it was before it stopped the job on
 * draining (the job is stopped only once the handover's release ends the term, like a loss).
 */
export interface ExecCalibration {
  readonly ignoreHandover?: boolean;
}

/**
 * runExec runs the command under the lock and returns the exit status. `spawn` starts the command
 * (spawnGroup); only the safety suite's calibration passes another (test/safety/faults/child-only-exec.ts,
 * which signals the direct child alone, as exec once did — and a grandchild outlived the term and
 * wrote after the successor's grant), or a calibration.
 */
export async function runExec(
  argv: readonly string[],
  spawn: typeof spawnGroup = spawnGroup,
  calibration: ExecCalibration = {},
): Promise<number> {
  const followHandover = calibration.ignoreHandover !== true;
  const o = parseExecArgs(argv);
  // An entry that provides no lock stores (client/store-loader.ts): say so as a usage error.
  if (o.store !== undefined && !storesAvailable()) throw new UsageError('--store', NO_STORES);
  const log = createLogger(o.logLevel, { component: 'exec', lock: o.locks.join(' ') });

  let set: HeldLockSet;
  try {
    set = await acquire(o.locks, {
      ...(o.kubeconfig !== undefined ? { kubeconfig: o.kubeconfig } : {}),
      ...(o.waitMs !== undefined ? { waitMs: o.waitMs } : {}),
      ...(o.runId !== undefined ? { runId: o.runId } : {}),
      ...(o.store !== undefined ? { store: o.store } : {}),
      ...(o.ttlMs !== undefined ? { ttlMs: o.ttlMs } : {}),
      ...(o.namespace !== undefined ? { namespace: o.namespace } : {}),
      // skip and fail make the same decision; only the exit status tells them apart.
      ifHeld: o.ifHeld === 'wait' ? 'wait' : 'fail',
      // exec is the app of a handover: it holds one long enough to stop the group first.
      ...(followHandover ? { minDrainMs: (t: TermTimings) => graceFor(t, o.graceMs) + DRAIN_MARGIN_MS } : {}),
      program: 'fencepost exec',
      log,
    });
  } catch (err) {
    if (err instanceof AlreadyDoneError) {
      process.stderr.write(`fencepost exec: ${err.message}\n`);
      return EXIT_ALREADY_DONE;
    }
    if (err instanceof LockHeldError && o.ifHeld === 'skip') {
      process.stderr.write(`fencepost exec: skipped: ${err.message}\n`);
      return EXIT_SKIPPED;
    }
    if (err instanceof NotAcquiredError) {
      process.stderr.write(`fencepost exec: ${err.message}\n`);
      return EXIT_NOT_ACQUIRED;
    }
    // A URL this executable's stores cannot use (the compiled agent: a Sentinel or Cluster URL).
    if (err instanceof StoreUrlError) throw new UsageError('--store', err.problem);
    throw err;
  }
  const [cmd, ...args] = o.command;
  // With several locks, the shortest term bounds both: the first lock that could be granted again elsewhere.
  const grace = Math.min(...set.locks.map((l) => graceFor(l.timings, o.graceMs)));
  const windowMs = Math.min(
    ...set.locks.map((l) => Math.max(0, l.timings.leaseDurationMs - l.timings.renewDeadlineMs)),
  );
  if (process.pid === 1) log.warn('Running as PID 1; orphans of the command will not be reaped (see README, Jobs)');

  // The loss, from the sessions' events rather than set.signal: release() aborts the signal
  // itself, and a loss during release (cut off while withdrawing) must still bound it. Any lock
  // of the set lost is the set lost.
  let lostAt: number | undefined;
  // Aborted at the end of the post-loss window: every request still out is then cancelled.
  const windowEnd = new AbortController();
  let running = true;
  // The group is being stopped: a lock was lost, or is being handed over.
  let stopping = false;
  // The lock being handed over (the first to drain); exec answers its handover once the group is gone.
  let handover: { readonly lock: HeldLock; readonly drainEndsAt: number } | undefined;
  let killAt = 0;
  let killTimer: NodeJS.Timeout | undefined;
  // Immediately before the command starts, every lock is still held (checked against the clock
  // now: a pause since the grant may have outlasted a term) and none is being handed over. From
  // here to the subscriptions below nothing awaits, so no later event can slip in between.
  const notHeld = set.locks.filter((l) => !l.isHeld() || (followHandover && l.draining() !== undefined));
  if (notHeld.length > 0) {
    const names = notHeld.map((l) => l.lock).join(', ');
    process.stderr.write(`fencepost exec: lock ${names} lost or handed over before the command started; not run\n`);
    for (const l of notHeld) if (l.draining() !== undefined) await l.drained().catch(() => false);
    await set.release({ timeoutMs: windowMs }).catch((err: unknown) => {
      log.error({ err }, 'Failed to release the locks of a set not held whole');
    });
    return EXIT_NOT_ACQUIRED;
  }
  const group = spawn(cmd, args, commandEnv(process.env, set.locks));
  /** stopGroup: SIGTERM (once), and SIGKILL after `afterMs` — or when an earlier stop set it, if sooner. */
  const stopGroup = (afterMs: number): void => {
    if (!stopping) group.signal('SIGTERM');
    stopping = true;
    const at = performance.now() + afterMs;
    if (killTimer !== undefined && killAt <= at) return;
    killAt = at;
    clearTimeout(killTimer);
    killTimer = setTimeout(() => {
      group.signal('SIGKILL');
    }, afterMs);
  };
  const onLost = (): void => {
    if (lostAt !== undefined) return;
    lostAt = performance.now();
    // Requests made after this are bounded by the window: once it has passed, a successor may
    // hold the lock and nothing exec still has to say matters to anyone.
    setTimeout(() => {
      windowEnd.abort(new Error(`abandoned ${windowMs} ms after losing the lock`));
    }, windowMs).unref();
    if (!running) return;
    log.error({ graceMs: grace }, 'Lost lock; stopping command');
    stopGroup(grace);
  };
  const onDraining = (l: HeldLock, to: string, drainMs: number): void => {
    if (handover !== undefined) return;
    handover = { lock: l, drainEndsAt: performance.now() + drainMs };
    if (!running) return; // the command is done: exec releases next anyway
    // SIGKILL ends before the drain does, so the group is gone before the session's own release.
    const afterMs = Math.max(0, Math.min(grace, drainMs - DRAIN_MARGIN_MS));
    log.warn({ lock: l.lock, to, drainMs, graceMs: afterMs }, 'Handing lock over; stopping command');
    stopGroup(afterMs);
  };
  const offEvents = set.onEvent((e) => {
    const l = set.locks.find((h) => h.lock === e.lock && h.token.toString() === e.token);
    if (l === undefined) return;
    // The release that ends a handover exec answered (or whose drain ran out while the group was
    // being stopped) is the handover's end, not a loss: the other locks are still held.
    if (e.type === 'released' && handover !== undefined && handover.lock === l) return;
    // Any other release while the command runs is not exec's own (exec releases after the command
    // exits): the lock is no longer held, so the command stops as on a loss.
    if (e.type === 'lost' || e.type === 'released') onLost();
  });
  const offHandovers = followHandover
    ? set.locks.map((l) =>
        l.onHandover((n) => {
          if (n.type === 'draining') onDraining(l, n.to ?? '?', n.drainMs ?? 0);
        }),
      )
    : [];
  const forward = (sig: NodeJS.Signals) => (): void => {
    group.signal(sig);
  };
  // The command has left exec's terminal (process-group.ts): forward what the terminal or the
  // kubelet sends exec. A hangup that killed exec would leave the command running unsupervised.
  const forwarded = (['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'] as const).map((sig) => {
    const handler = forward(sig);
    process.on(sig, handler);
    return () => process.off(sig, handler);
  });
  const status = await new Promise<number>((resolve) => {
    group.child.on('error', (err) => {
      process.stderr.write(`fencepost exec: cannot run ${JSON.stringify(cmd)}: ${err.message}\n`);
      resolve(127);
    });
    group.child.on('exit', (code, signal) => {
      resolve(code ?? 128 + (signal !== null ? constants.signals[signal] : 0));
    });
  });
  running = false;
  if (stopping) {
    // The group may outlive its leader (the shell died of SIGTERM, its child ignores it): the
    // rest get what is left of the grace, then SIGKILL.
    if (!(await group.emptied(killAt - performance.now()))) group.signal('SIGKILL');
  } else if (group.alive()) {
    // Processes the command left behind (`cmd &`) would go on with FENCEPOST_TOKEN after the
    // release hands the lock on; they get the same SIGTERM, grace, SIGKILL.
    log.warn({ graceMs: grace }, 'Stopping processes the command left behind');
    group.signal('SIGTERM');
    if (!(await group.emptied(grace))) group.signal('SIGKILL');
  }
  clearTimeout(killTimer);
  for (const off of forwarded) off();
  if (handover !== undefined) {
    // Answer the handover only once the group is gone (SIGKILLed above; the kernel may take a
    // moment): then the release, and the successor's grant, come after the old job's last write.
    // A group that will not empty (zombies under PID 1) is left to the drain's end.
    const gone = await group.emptied(handover.drainEndsAt - performance.now());
    if (gone)
      await handover.lock.drained().catch((err: unknown) => log.error({ err }, 'Failed to answer the handover'));
    log.info({ lock: handover.lock.lock, groupGone: gone }, 'Command stopped for the handover');
  }
  for (const off of offHandovers) off();
  const lostWhileRunning = stopping;
  const code = lostWhileRunning ? EXIT_LOST : status;
  // Before a loss these requests wait as long as the HTTP client does (a failure is exec's own);
  // after one, each is bounded by the window and aborted on the wire at its end.
  const bound = { signal: windowEnd.signal };
  const abandoned = (): boolean => windowEnd.signal.aborted;
  let failure: { err: unknown } | undefined;
  try {
    // --run-id takes one lock (exec-flags.ts): the set is that lock.
    if (status === 0 && !lostWhileRunning && o.runId !== undefined) await set.locks[0]?.complete(bound);
  } catch (err) {
    if (lostAt === undefined) failure = { err };
    else if (!abandoned()) log.error({ err }, 'Failed to report the run completed after losing the lock');
  }
  // Released even when the report failed: the session stops renewing and the pod's claim is free.
  // After an abandoned report the bound has ended already, and the release only stops the session.
  try {
    await set.release(bound);
  } catch (err) {
    if (lostAt === undefined) failure ??= { err };
    else if (!abandoned()) log.error({ err }, 'Failed to release lock after losing it');
  }
  offEvents();
  if (abandoned()) log.error({ windowMs }, 'Abandoned requests to the API server after losing the lock');
  if (failure !== undefined) throw failure.err;
  return code;
}

/**
 * graceFor: the SIGTERM→SIGKILL grace. The agent declares the lock lost at its renew deadline;
 * the controller cannot re-grant before a full lease duration after it last saw a renewal, so
 * (lease − renew deadline) is the most the command may keep running. Default: half of that.
 */
export function graceFor(t: TermTimings, flagMs: number | undefined): number {
  const window = Math.max(0, t.leaseDurationMs - t.renewDeadlineMs);
  return Math.min(flagMs ?? Math.floor(window / 2), window);
}
