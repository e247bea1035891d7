/**
 * `fencepost exec --lock NAME [--wait D] [--grace D] -- CMD [ARGS...]` — run CMD only while this
 * pod holds the lock: acquire (in-process, with the pod identity from the downward API), run CMD
 * with FENCEPOST_LOCK and FENCEPOST_TOKEN in its environment, renew while it runs, release when
 * it exits. If the lock is lost, CMD gets SIGTERM and, after the grace, SIGKILL; the grace is cut
 * to end before the lease could expire on the server (lease duration − renew deadline).
 *
 * Exit codes: CMD's own (128 + signal number when it was killed by a signal), or
 *   EXIT_NOT_ACQUIRED (3): not granted within --wait;
 *   EXIT_LOST (4): the lock was lost while CMD ran (CMD was stopped);
 *   EXIT_ALREADY_DONE (5): --run-id was already reported completed (CMD did not run);
 *   2: bad usage.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { acquire, AlreadyDoneError, NotAcquiredError } from '../client/acquire.ts';
import { parseDuration } from '../config/duration.ts';
import { parseFlags } from '../config/flags.ts';
import { parseLogLevel } from '../config/log-level.ts';
import { UsageError } from '../config/usage-error.ts';
import { createLogger } from '../observability/logger.ts';
import type { TermTimings } from '../protocol/timings.ts';
import { EXIT_ALREADY_DONE, EXIT_LOST, EXIT_NOT_ACQUIRED } from './exec-usage.ts';

export { EXIT_ALREADY_DONE, EXIT_LOST, EXIT_NOT_ACQUIRED } from './exec-usage.ts';

/** runExec runs the command under the lock and returns the exit status. */
export async function runExec(argv: readonly string[]): Promise<number> {
  const dash = argv.indexOf('--');
  if (dash < 0 || dash === argv.length - 1)
    throw new UsageError('--', 'missing, or no command after it; usage: fencepost exec --lock NAME -- CMD [ARGS...]');
  const command = argv.slice(dash + 1);
  const values = parseFlags(argv.slice(0, dash), {
    lock: { type: 'string' },
    wait: { type: 'string' },
    'run-id': { type: 'string' },
    grace: { type: 'string' },
    kubeconfig: { type: 'string' },
    'log-level': { type: 'string', default: 'error' },
  });
  if (values.lock === undefined) throw new UsageError('--lock', 'required');
  const waitMs = values.wait !== undefined ? parseDuration(values.wait, '--wait') : undefined;
  const graceFlagMs = values.grace !== undefined ? parseDuration(values.grace, '--grace') : undefined;
  const level = parseLogLevel(values['log-level']);
  const log = createLogger(level, { component: 'exec', lock: values.lock });

  let lock;
  try {
    lock = await acquire(values.lock, {
      ...(values.kubeconfig !== undefined ? { kubeconfig: values.kubeconfig } : {}),
      ...(waitMs !== undefined ? { waitMs } : {}),
      ...(values['run-id'] !== undefined ? { runId: values['run-id'] } : {}),
      log,
    });
  } catch (err) {
    if (err instanceof AlreadyDoneError) {
      process.stderr.write(`fencepost exec: ${err.message}\n`);
      return EXIT_ALREADY_DONE;
    }
    if (err instanceof NotAcquiredError) {
      process.stderr.write(`fencepost exec: ${err.message}\n`);
      return EXIT_NOT_ACQUIRED;
    }
    throw err;
  }
  const [cmd, ...args] = command;
  const child = spawn(cmd ?? '', args, {
    stdio: 'inherit',
    env: { ...process.env, FENCEPOST_LOCK: lock.lock, FENCEPOST_TOKEN: lock.token.toString() },
  });
  let lostWhileRunning = false;
  let killTimer: NodeJS.Timeout | undefined;
  const onLost = (): void => {
    if (child.exitCode !== null) return;
    lostWhileRunning = true;
    const grace = graceFor(lock.timings, graceFlagMs);
    log.error({ graceMs: grace }, 'Lost lock; stopping command');
    child.kill('SIGTERM');
    killTimer = setTimeout(() => {
      child.kill('SIGKILL');
    }, grace);
  };
  lock.signal.addEventListener('abort', onLost, { once: true });
  const forward = (sig: NodeJS.Signals) => (): void => {
    child.kill(sig);
  };
  const onTerm = forward('SIGTERM');
  const onInt = forward('SIGINT');
  process.on('SIGTERM', onTerm);
  process.on('SIGINT', onInt);
  const status = await new Promise<number>((resolve) => {
    child.on('error', (err) => {
      process.stderr.write(`fencepost exec: cannot run ${JSON.stringify(cmd)}: ${err.message}\n`);
      resolve(127);
    });
    child.on('exit', (code, signal) => {
      resolve(code ?? 128 + (signal !== null ? constants.signals[signal] : 0));
    });
  });
  clearTimeout(killTimer);
  process.off('SIGTERM', onTerm);
  process.off('SIGINT', onInt);
  lock.signal.removeEventListener('abort', onLost);
  if (status === 0 && !lostWhileRunning && values['run-id'] !== undefined) await lock.complete();
  await lock.release();
  return lostWhileRunning ? EXIT_LOST : status;
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
