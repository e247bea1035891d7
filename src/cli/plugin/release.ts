/**
 * `kubectl fencepost release LOCK --force [--yes] [--wait[=D]]`: asks the controller to end the
 * current grant at once (protocol/handover.ts, FORCE_RELEASE_REQUEST_ANNOTATION) and grant the
 * next candidate with a larger token. Asks for confirmation unless --yes, after a warning: the
 * released holder may still be running and believe it holds the lock; only fencing guards keep
 * its writes out. The controller records a ForceReleased Event naming who asked.
 */
import { createInterface } from 'node:readline/promises';
import { parsePluginArgs } from '../../config/plugin.ts';
import { UsageError } from '../../config/usage-error.ts';
import { parseLease } from '../../lease/record.ts';
import {
  FORCE_RELEASE_REQUEST_ANNOTATION,
  FORCE_RELEASE_RESULT_ANNOTATION,
  formatForceReleaseRequest,
  parseHandoverResult,
} from '../../protocol/handover.ts';
import { leaseName } from '../../protocol/names.ts';
import { connect, readLease, readLock } from './read.ts';
import { RELEASE } from './usage.ts';
import { annotateLock, waitForAnswer, whoAmI } from './write.ts';

/** FORCE_WARNING is printed before every forced release. */
export const FORCE_WARNING =
  'WARNING: a forced release does not stop the holder. Its process may still be running and still believe it holds the lock until its agent sees the release; only the fencing guards (resources that check the token) refuse its writes.';

/** runRelease runs one `release` command line; resolves with the exit code. */
export async function runRelease(argv: readonly string[]): Promise<number> {
  const o = parsePluginArgs(RELEASE, argv);
  if (!o.force)
    throw new UsageError(
      '--force',
      'required: the plugin only forces releases (a holder releases its own lock through its agent)',
    );
  const c = connect(o);
  const name = o.lock ?? '';
  await readLock(c, c.namespace, name); // a clear "not found" before anything else
  const lease = await readLease(c, c.namespace, leaseName(name));
  const record = lease !== undefined ? parseLease(lease) : undefined;
  if (record?.holder === undefined || record.token === undefined) {
    process.stderr.write(`error: nobody holds lock ${name}: there is nothing to release\n`);
    return 1;
  }
  process.stderr.write(`${FORCE_WARNING}\n`);
  if (!o.yes) {
    if (process.stdin.isTTY !== true) {
      process.stderr.write('error: not confirmed: stdin is not a terminal; pass --yes to confirm\n');
      return 1;
    }
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    const answer = await rl.question(
      `Release lock ${name} from pod ${record.holder.name} (token ${record.token})? Type the lock's name to confirm: `,
    );
    rl.close();
    if (answer.trim() !== name) {
      process.stderr.write('Not confirmed; nothing done.\n');
      return 1;
    }
  }
  const by = await whoAmI(c);
  await annotateLock(c, c.namespace, name, {
    [FORCE_RELEASE_REQUEST_ANNOTATION]: formatForceReleaseRequest({
      token: record.token,
      requestedAt: new Date().toISOString(),
      by,
    }),
  });
  process.stdout.write(`Asked to release lock ${name} from pod ${record.holder.name} (token ${record.token}).\n`);
  if (o.waitMs === undefined) return 0;
  const r = parseHandoverResult(
    await waitForAnswer(
      c,
      c.namespace,
      name,
      { request: FORCE_RELEASE_REQUEST_ANNOTATION, result: FORCE_RELEASE_RESULT_ANNOTATION },
      record.token.toString(),
      o.waitMs,
    ),
  );
  if (r === undefined) {
    process.stderr.write('error: no answer from the controller within --wait; the request stays on the lock\n');
    return 1;
  }
  if (o.output === 'json') process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
  else process.stdout.write(`${r.outcome}: ${r.message}\n`);
  return r.outcome === 'Completed' ? 0 : 1;
}
