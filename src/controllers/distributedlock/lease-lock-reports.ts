/**
 * What the one-Lease policy (lease-lock.ts) reports beside its grants, each once per finding and
 * kept in the lock's memory record: a tampered or exhausted fencing token, refused run
 * completions, invalid Election priorities; and its answers to planned-handover and
 * forced-release requests on the lock's annotations.
 */
import { EventReason } from '../../api/v1alpha1/conditions.ts';
import type { DistributedLock } from '../../api/v1alpha1/distributedlock.ts';
import type { Logger } from '../../observability/logger.ts';
import {
  FORCE_RELEASE_REQUEST_ANNOTATION,
  FORCE_RELEASE_RESULT_ANNOTATION,
  HANDOVER_REQUEST_ANNOTATION,
  HANDOVER_RESULT_ANNOTATION,
  formatHandoverResult,
} from '../../protocol/handover.ts';
import { PRIORITY_ANNOTATION, TOKEN_ANNOTATION, leaseName } from '../../protocol/names.ts';
import type { ObjectKey } from '../../runtime/controller.ts';
import { isConflict, isInvalid, isNotFound } from '../../runtime/errors.ts';
import type { HandoverAnswer } from './decide-handover.ts';
import { describeTamper, type Decision, type Observation } from './decide.ts';
import type { CallContext, LockIO } from './lock-io.ts';
import { NOTHING_REPORTED } from './memory.ts';
import { MAX_PRIORITY, MIN_PRIORITY } from './pods.ts';
import { refusedCompletions } from './status.ts';

/**
 * reportTampering records a Warning Event once for each tampering found (per values found): the
 * Lease's token lowered below status.fencingToken — the next grant is taken above every token
 * known, and the Event names what was found — or no token left to issue. Called for every
 * decision, before its actions, so that a lowered token on a vacant Lease, granted in the same
 * reconcile, is reported too.
 */
export function reportTampering(
  io: LockIO,
  key: ObjectKey,
  lock: DistributedLock,
  obs: Observation,
  dec: Decision,
  log: Logger,
): void {
  const lease = leaseName(lock.metadata.name ?? '');
  const t = dec.tampered;
  const found =
    dec.waiting === 'TokenRegressed'
      ? `exhausted|${obs.lease?.record.token ?? ''}|${lock.status?.fencingToken ?? ''}`
      : t !== undefined
        ? `tampered|${describeTamper(t)}`
        : undefined;
  const m = io.memory(key);
  if (found === undefined) {
    m.tampered = undefined;
    return;
  }
  if (m.tampered === found) return;
  m.tampered = found;
  if (t !== undefined && dec.waiting !== 'TokenRegressed') {
    log.info(
      {
        leaseToken: t.malformed ?? t.leaseToken?.toString(),
        statusToken: t.statusToken?.toString(),
        revision: t.revision?.toString(),
        floor: t.floor.toString(),
      },
      'Lease fencing token went backwards',
    );
    const above = [
      ...(t.statusToken !== undefined ? [`status.fencingToken ${t.statusToken}`] : []),
      ...(t.revision !== undefined ? [`the Lease's resourceVersion ${t.revision}`] : []),
      ...(obs.fencing.backend === 'Redis' ? ['the Redis counter'] : []),
    ].join(', ');
    io.event(
      lock,
      'Warning',
      EventReason.LeaseTampered,
      `Lease ${lease} annotation ${TOKEN_ANNOTATION} is ${describeTamper(t)}: someone other than the controller wrote it. The next grant takes a token above every token known (${above})${dec.holder !== undefined ? `, once the term of pod ${dec.holder.name} ends` : ''}`,
    );
    return;
  }
  log.info(
    { leaseToken: obs.lease?.record.token?.toString(), statusToken: lock.status?.fencingToken },
    'No fencing token left to issue',
  );
  io.event(
    lock,
    'Warning',
    EventReason.LeaseTampered,
    `No fencing token is left to issue: status.fencingToken is ${lock.status?.fencingToken ?? 'unset'} and Lease ${lease} annotation ${TOKEN_ANNOTATION} is ${obs.lease?.record.token?.toString() ?? 'unset'}; one of them is at the largest token, 2^63-1 (someone raised it). No grant until it is set back below it`,
  );
}

/** reportRefusedCompletions logs and records a Warning Event once for each refused completion on the Lease. */
export function reportRefusedCompletions(
  io: LockIO,
  key: ObjectKey,
  lock: DistributedLock,
  obs: Observation,
  now: Date,
  log: Logger,
): void {
  const refused = refusedCompletions(obs, now);
  const m = io.memory(key);
  const seen = m.refused;
  const current = new Set<string>();
  for (const { entry, verdict } of refused) {
    const id = `${entry.runId}|${entry.token}|${verdict}`;
    current.add(id);
    if (seen.has(id)) continue;
    const why =
      verdict === 'future'
        ? `its completedAt ${entry.completedAt.toISOString()} is in the future`
        : `its token ${entry.token} is above every token of the Lease (${obs.lease?.record.token ?? 'none'})`;
    log.info({ runId: entry.runId, token: entry.token.toString(), verdict }, 'Refused a completed run on the Lease');
    io.event(
      lock,
      'Warning',
      EventReason.CompletionRefused,
      `Run ${JSON.stringify(entry.runId)} recorded completed by pod ${entry.holder || '?'} was not accepted: ${why}; it does not count as completed`,
    );
  }
  m.refused = current.size > 0 ? current : NOTHING_REPORTED;
}

/**
 * answerHandover removes the handover request from the lock — only while it is still the
 * request decided about (a JSON Patch `test`: a newer request is never cleared) — and records
 * the answer beside it and in an Event. A failed test (422) or a vanished lock is skipped: the
 * lock's own update event brings the next reconcile.
 */
export async function answerHandover(
  io: LockIO,
  lock: DistributedLock,
  a: HandoverAnswer,
  { log, signal }: CallContext,
): Promise<void> {
  const writer = io.d.lockMetadata;
  if (writer === undefined) return;
  const at = io.d.clock.now().toISOString();
  const result = formatHandoverResult({
    to: a.to,
    token: a.token,
    outcome: a.outcome,
    message: a.message,
    at,
    ...(a.newToken !== undefined ? { newToken: a.newToken.toString() } : {}),
  });
  const path = (k: string): string => `/metadata/annotations/${k.replaceAll('~', '~0').replaceAll('/', '~1')}`;
  const force = a.kind === 'forceRelease';
  const requestKey = force ? FORCE_RELEASE_REQUEST_ANNOTATION : HANDOVER_REQUEST_ANNOTATION;
  const resultKey = force ? FORCE_RELEASE_RESULT_ANNOTATION : HANDOVER_RESULT_ANNOTATION;
  try {
    await writer.jsonPatch(
      lock,
      [
        { op: 'test', path: path(requestKey), value: a.raw },
        { op: 'remove', path: path(requestKey) },
        { op: 'add', path: path(resultKey), value: result },
      ],
      signal,
    );
  } catch (err) {
    if (isNotFound(err) || isInvalid(err) || isConflict(err)) {
      log.debug({ err }, 'Handover request changed before it was answered; skipped');
      return;
    }
    throw new Error('Failed to answer the handover request on the DistributedLock', { cause: err });
  }
  log.info({ to: a.to, token: a.token, outcome: a.outcome, kind: a.kind ?? 'handover' }, 'Answered handover request');
  // A forced release has its Event when the Lease is released (ForceReleased); only a refusal is reported here.
  if (force) {
    if (a.outcome !== 'Completed')
      io.event(lock, 'Warning', EventReason.ForceReleased, `Forced release refused: ${a.message}`);
    return;
  }
  const reason =
    a.outcome === 'Completed'
      ? EventReason.HandoverCompleted
      : a.outcome === 'TimedOut'
        ? EventReason.HandoverTimedOut
        : EventReason.HandoverRefused;
  io.event(
    lock,
    a.outcome === 'Completed' ? 'Normal' : 'Warning',
    reason,
    a.outcome === 'Completed'
      ? `Handed over to ${a.message}`
      : `Handover${a.to !== '' ? ` to pod ${a.to}` : ''} ${a.outcome === 'TimedOut' ? 'timed out' : 'refused'}: ${a.message}`,
  );
}

/**
 * reportBadPriorities records a Warning Event once for each Election candidate whose
 * fencepost.io/priority is not an int32 (it counts as 0): per pod incarnation and value, so a
 * fixed and broken-again annotation is reported again, and a reconcile loop is not.
 */
export function reportBadPriorities(
  io: LockIO,
  key: ObjectKey,
  lock: DistributedLock,
  dec: Decision,
  log: Logger,
): void {
  const m = io.memory(key);
  const seen = m.badPriorities;
  const current = new Set<string>();
  for (const p of dec.candidates) {
    if (p.invalidPriority === undefined) continue;
    const id = `${p.ref.name}/${p.ref.uid}=${p.invalidPriority}`;
    current.add(id);
    if (seen.has(id)) continue;
    log.info({ pod: p.ref.name, value: p.invalidPriority }, 'Ignored an invalid Pod priority');
    io.event(
      lock,
      'Warning',
      EventReason.InvalidPriority,
      `Pod ${p.ref.name} has annotation ${PRIORITY_ANNOTATION}=${JSON.stringify(p.invalidPriority)}, which is not an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY}; it counts as 0`,
    );
  }
  m.badPriorities = current.size > 0 ? current : NOTHING_REPORTED;
}
