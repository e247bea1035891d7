/**
 * `kubectl fencepost explain`: why nobody holds a lock, or why a given pod is not its holder.
 * Pure: a snapshot, what was found of the controller's leader-election Lease, and the wall clock
 * in; findings out.
 *
 * The reasons are not a second copy of the controller's rules. The snapshot is turned into the
 * controller's own Observation and run through its own decide() (controllers/distributedlock/
 * decide.ts), with its own candidate rules (pods.ts: selector, Ready, terminating, terminated,
 * Mutex requests and queue order); this module only words the result and adds what decide cannot
 * see: whether a controller is there at all.
 *
 * What differs from the controller, and why: the controller times a term by its own monotonic
 * clock from when it *saw* the Lease change; the plugin has only the Lease's renewTime (written by
 * the holder's clock) and the time of the Lease's last write (managedFields, written by the API
 * server) against this machine's clock. Expiry and lock-delay countdowns are therefore estimates,
 * said so in the output; the reasons themselves do not depend on them.
 *
 * By job: this module is the entry (explainLock, the controller finding, the text);
 * explain-observation.ts rebuilds the controller's Observation from a snapshot;
 * explain-reasons.ts words the lock's and a pod's reasons.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { DEFAULT_MODE } from '../../api/v1alpha1/distributedlock.ts';
import { decide } from '../../controllers/distributedlock/decide.ts';
import { leaseName } from '../../protocol/names.ts';
import { DEFAULT_LEASE_DURATION_SECONDS } from '../../protocol/timings.ts';
import { humanDuration, timeMs } from './format.ts';
import type { ControllerLeaseView, LockSnapshot } from './snapshot.ts';
import { readRecord } from './status-view.ts';
import { observation } from './explain-observation.ts';
import { lockReasons, podReasons, type Finding } from './explain-reasons.ts';

export type { Finding, FindingCode } from './explain-reasons.ts';

/** Explanation is what explain prints (`-o json` prints it as is). */
export interface Explanation {
  readonly namespace: string;
  readonly name: string;
  readonly mode: string;
  /** holder: the pod holding the lock per its Lease, or null. */
  readonly holder: string | null;
  /** reasons: why the lock is (not) held, most important first. */
  readonly reasons: readonly Finding[];
  /** pod: with --pod, why that pod is not the holder (or that it is). */
  readonly pod: { readonly name: string; readonly reasons: readonly Finding[] } | null;
  /** controller: what was found of the controller's leader election. */
  readonly controller: Finding;
}

/** ExplainInput is everything explainLock reads. */
export interface ExplainInput {
  readonly snapshot: LockSnapshot;
  readonly controller: ControllerLeaseView;
  /** nowMs: this machine's wall clock (ms since the epoch). */
  readonly nowMs: number;
  /** pod: with --pod, its name and the pod as read (undefined when it does not exist). */
  readonly pod?: { readonly name: string; readonly object: V1Pod | undefined };
}

/** explainLock explains one lock. */
export function explainLock(input: ExplainInput): Explanation {
  const { snapshot: s, nowMs } = input;
  const lock = s.lock;
  const { record, problem } = readRecord(s);
  const obs = observation(s, record, nowMs);
  const dec = decide(obs, nowMs);
  const reasons: Finding[] = [];
  const status = lock.status;
  if (status === undefined || (status.conditions ?? []).length === 0) {
    reasons.push({
      code: 'NotReconciled',
      message: `The lock has no status: no controller has reconciled it. Is the controller running, and does it watch namespace ${lock.metadata.namespace ?? '?'} (its --namespace flags)?`,
    });
  } else if (
    lock.metadata.generation !== undefined &&
    status.observedGeneration !== undefined &&
    status.observedGeneration < lock.metadata.generation
  ) {
    reasons.push({
      code: 'SpecNotObserved',
      message: `The controller has not acted on the latest spec yet (generation ${lock.metadata.generation}, status is of generation ${status.observedGeneration}).`,
    });
  }
  if (problem !== null) {
    reasons.push({
      code: 'LeaseUnreadable',
      message: `The Lease ${leaseName(lock.metadata.name ?? '')} cannot be read: ${problem}. A token annotation that is no token the controller reads as absent (Ready=False, LeaseTampered) and grants next above status.fencingToken and the Lease's resourceVersion; anything else it cannot read stops grants until it is repaired.`,
    });
  } else {
    reasons.push(...lockReasons(s, obs, dec, record, nowMs));
  }
  return {
    namespace: lock.metadata.namespace ?? '',
    name: lock.metadata.name ?? '',
    mode: lock.spec.mode ?? DEFAULT_MODE,
    holder: record?.holder?.name ?? null,
    reasons,
    pod: input.pod !== undefined ? { name: input.pod.name, reasons: podReasons(input.pod, obs, dec, record) } : null,
    controller: controllerFinding(input.controller, nowMs),
  };
}

/** controllerFinding words what was found of the controller's leader-election Lease. */
export function controllerFinding(c: ControllerLeaseView, nowMs: number): Finding {
  switch (c.state) {
    case 'unknown':
      return { code: 'ControllerUnknown', message: `Could not check the controller's leader election: ${c.detail}.` };
    case 'absent':
      return {
        code: 'ControllerLeaseAbsent',
        message: `No leader-election Lease of the controller found in ${c.where}: the controller is not running, or runs with --leader-elect=false or another --leader-election-id (pass --controller-lease NAMESPACE/NAME).`,
      };
    case 'found': {
      const l = c.lease;
      const where = `${l.metadata?.namespace ?? '?'}/${l.metadata?.name ?? '?'}`;
      const who = l.spec?.holderIdentity;
      const renew = timeMs(l.spec?.renewTime);
      const durationMs = (l.spec?.leaseDurationSeconds ?? DEFAULT_LEASE_DURATION_SECONDS) * 1000;
      if (who === undefined || who === '')
        return {
          code: 'ControllerNotLeading',
          message: `The controller's Lease ${where} names no leader: no replica is granting locks.`,
        };
      if (renew === undefined || nowMs - renew > durationMs)
        return {
          code: 'ControllerNotLeading',
          message: `The controller's Lease ${where} names ${who}, but it was last renewed ${renew !== undefined ? `${humanDuration(nowMs - renew)} ago` : 'never'} (lease ${humanDuration(durationMs)}): no replica is leading, so nothing is granted (holders keep renewing).`,
        };
      return {
        code: 'ControllerLeading',
        message: `The controller's leader is ${who} (Lease ${where}, renewed ${humanDuration(nowMs - renew)} ago).`,
      };
    }
  }
}

/** explainText renders an explanation for people. */
export function explainText(e: Explanation): string {
  const lines = [
    `Lock:        ${e.namespace}/${e.name} (${e.mode})`,
    `Holder:      ${e.holder ?? '<none>'}`,
    'Why:',
    ...e.reasons.map((r) => `  ${r.code}: ${r.message}`),
  ];
  if (e.pod !== null) lines.push(`Pod ${e.pod.name}:`, ...e.pod.reasons.map((r) => `  ${r.code}: ${r.message}`));
  lines.push('Controller:', `  ${e.controller.code}: ${e.controller.message}`);
  return `${lines.join('\n')}\n`;
}
