/**
 * `kubectl fencepost handover LOCK --to POD [--drain D] [--wait[=D]]`: asks the controller for a
 * planned handover (protocol/handover.ts) by annotating the lock with the target and the token of
 * the grant now on the Lease, so that a request that arrives late never moves a later grant.
 * With --wait, waits for the controller's answer and exits 0 only when it completed.
 */
import { parsePluginArgs } from '../../config/plugin.ts';
import { UsageError } from '../../config/usage-error.ts';
import { parseLease } from '../../lease/record.ts';
import {
  HANDOVER_REQUEST_ANNOTATION,
  HANDOVER_RESULT_ANNOTATION,
  MAX_DRAIN_SECONDS,
  formatHandoverRequest,
  parseHandoverResult,
} from '../../protocol/handover.ts';
import { leaseName } from '../../protocol/names.ts';
import { connect, readLease, readLock } from './read.ts';
import { HANDOVER } from './usage.ts';
import { annotateLock, waitForAnswer, whoAmI } from './write.ts';

/** runHandover runs one `handover` command line; resolves with the exit code. */
export async function runHandover(argv: readonly string[]): Promise<number> {
  const o = parsePluginArgs(HANDOVER, argv);
  if (o.to === undefined) throw new UsageError('--to', 'missing: the pod to hand the lock to');
  const drainSeconds = o.drainMs !== undefined ? o.drainMs / 1000 : undefined;
  if (drainSeconds !== undefined && (!Number.isInteger(drainSeconds) || drainSeconds > MAX_DRAIN_SECONDS))
    throw new UsageError('--drain', `must be whole seconds from 0s to ${MAX_DRAIN_SECONDS}s`);
  const c = connect(o);
  const name = o.lock ?? '';
  const lock = await readLock(c, c.namespace, name);
  const lease = await readLease(c, c.namespace, leaseName(name));
  const record = lease !== undefined ? parseLease(lease) : undefined;
  if (record?.holder === undefined || record.token === undefined) {
    process.stderr.write(`error: nobody holds lock ${name}: there is nothing to hand over\n`);
    return 1;
  }
  if (record.holder.name === o.to) {
    process.stderr.write(`error: pod ${o.to} already holds lock ${name}\n`);
    return 1;
  }
  const by = await whoAmI(c);
  await annotateLock(c, c.namespace, name, {
    [HANDOVER_REQUEST_ANNOTATION]: formatHandoverRequest({
      to: o.to,
      token: record.token,
      drainSeconds,
      requestedAt: new Date().toISOString(),
      by,
    }),
  });
  const drain = drainSeconds ?? lock.spec.handover?.drainSeconds ?? 30;
  process.stdout.write(
    `Asked to hand lock ${name} over from pod ${record.holder.name} (token ${record.token}) to pod ${o.to}; drain up to ${drain}s.\n`,
  );
  if (o.waitMs === undefined) {
    process.stdout.write(
      `The controller answers in annotation ${HANDOVER_RESULT_ANNOTATION} (use --wait to wait for it).\n`,
    );
    return 0;
  }
  const text = await waitForAnswer(
    c,
    c.namespace,
    name,
    { request: HANDOVER_REQUEST_ANNOTATION, result: HANDOVER_RESULT_ANNOTATION },
    record.token.toString(),
    o.waitMs,
  );
  const r = parseHandoverResult(text);
  if (r === undefined) {
    process.stderr.write(`error: no answer from the controller within --wait; the request stays on the lock\n`);
    return 1;
  }
  if (o.output === 'json') process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
  else process.stdout.write(`${r.outcome}: ${r.message}\n`);
  return r.outcome === 'Completed' ? 0 : 1;
}
