/**
 * The reasons `kubectl fencepost explain` gives, in sentences: why nobody holds the lock (from the
 * controller's own decision on the snapshot), and why a given pod is not its holder.
 */
import type { V1Pod } from '@kubernetes/client-node';
import type { LabelSelector } from '../../api/v1alpha1/distributedlock.ts';
import {
  describeTamper,
  unactionable,
  type Decision,
  type Observation,
} from '../../controllers/distributedlock/decide.ts';
import {
  isCandidate,
  matchesSelector,
  requestedAt,
  summarizePod,
  type PodSummary,
} from '../../controllers/distributedlock/pods.ts';
import type { LockRecord } from '../../lease/record.ts';
import { sameHolder } from '../../protocol/holder.ts';
import { leaseName, podKeys, TOKEN_ANNOTATION } from '../../protocol/names.ts';
import { termTimingsOf } from '../../protocol/timings.ts';
import { humanDuration } from './format.ts';
import type { LockSnapshot } from './snapshot.ts';

/** FindingCode names one reason; stable, for scripts and tests to match on (`-o json`). */
export type FindingCode =
  // The lock as a whole.
  | 'Held'
  | 'HolderPodGone'
  | 'HolderNotReady'
  | 'HolderOverdue'
  | 'HolderTerminated'
  | 'GrantPending'
  | 'NoCandidatesSelected'
  | 'CandidatesNotReady'
  | 'NoRequests'
  | 'LockDelay'
  | 'FencingUnavailable'
  | 'FencingNotConfigured'
  | 'LeaseLost'
  | 'TokenRegressed'
  | 'LeaseNotRecorded'
  | 'LeaseUnreadable'
  | 'LeaseMissing'
  | 'NotReconciled'
  | 'SpecNotObserved'
  // One pod (--pod).
  | 'PodNotFound'
  | 'PodIsHolder'
  | 'PodOldIncarnation'
  | 'PodNotSelected'
  | 'PodTerminating'
  | 'PodTerminated'
  | 'PodNotReady'
  | 'PodNotRequested'
  | 'PodWaiting'
  | 'PodNextInLine'
  // The controller.
  | 'ControllerLeading'
  | 'ControllerNotLeading'
  | 'ControllerLeaseAbsent'
  | 'ControllerUnknown';

/** Finding is one reason, in a sentence. */
export interface Finding {
  readonly code: FindingCode;
  readonly message: string;
}

function selectorText(sel: LabelSelector): string {
  const parts = Object.entries(sel.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of sel.matchExpressions ?? []) {
    if (e.operator === 'Exists') parts.push(e.key);
    else if (e.operator === 'DoesNotExist') parts.push(`!${e.key}`);
    else parts.push(`${e.key} ${e.operator === 'In' ? 'in' : 'notin'} (${(e.values ?? []).join(',')})`);
  }
  return parts.join(',');
}

/** podState describes why a selected pod is not eligible (terminating, terminated, not Ready). */
function podState(p: PodSummary): string {
  if (p.terminating) return `${p.ref.name} (terminating)`;
  if (p.terminated) return `${p.ref.name} (containers terminated)`;
  return `${p.ref.name} (not Ready)`;
}

/** lockReasons: why the lock is (not) held, most important first. */
export function lockReasons(
  s: LockSnapshot,
  obs: Observation,
  dec: Decision,
  record: LockRecord | undefined,
  nowMs: number,
): Finding[] {
  const lock = s.lock;
  const out: Finding[] = [];
  const holder = record?.holder;
  const token = record?.token?.toString() ?? s.lease?.metadata?.annotations?.[TOKEN_ANNOTATION] ?? '?';
  const leaseMs = Math.max(
    termTimingsOf(record, lock.spec).leaseDurationMs,
    termTimingsOf(undefined, lock.spec).leaseDurationMs,
  );
  // 1: A holder decide keeps.
  if (dec.holder !== undefined) {
    const left = dec.expiresInMs ?? 0;
    out.push({
      code: 'Held',
      message: `Pod ${dec.holder.name} holds the lock with fencing token ${token}; unless it renews, its lease runs out in about ${humanDuration(left)} (by this machine's clock).`,
    });
    // A departed holder keeps its term until the lease runs out: a pod that vanished (force
    // deletion, node loss) is no proof that its process stopped (decide.ts, "Safety rule").
    const pod = obs.pods.find((p) => sameHolder(p.ref, dec.holder));
    if (pod === undefined)
      out.push({
        code: 'HolderPodGone',
        message: `Pod ${dec.holder.name} (uid ${dec.holder.uid}) no longer exists, but a vanished pod is no proof that it stopped: the controller waits for its lease to run out (about ${humanDuration(left)}) before granting anyone else.`,
      });
    else if (pod.terminating || !pod.ready)
      out.push({
        code: 'HolderNotReady',
        message: `Pod ${pod.ref.name} is ${pod.terminating ? 'terminating' : 'not Ready'}, but it keeps the lock while it renews: a holder's term ends when it releases, stops renewing, or the kubelet reports all its containers terminated.`,
      });
    return out;
  }
  // 2: A holder decide would end: overdue by our clock, or its containers terminated.
  if (holder !== undefined) {
    const pod = obs.pods.find((p) => sameHolder(p.ref, holder));
    const since = record?.renewTime !== undefined ? nowMs - record.renewTime.getTime() : undefined;
    out.push(
      pod?.terminated === true && (lock.spec.handoff?.onPodTerminated ?? true)
        ? {
            code: 'HolderTerminated',
            message: `The Lease still names pod ${holder.name}, but the kubelet reports all its containers terminated: the controller ends its term without waiting for expiry.`,
          }
        : {
            code: 'HolderOverdue',
            message: `The Lease still names pod ${holder.name}, but it was last renewed ${since !== undefined ? `${humanDuration(since)} ago` : 'at an unknown time'} (lease ${humanDuration(leaseMs)}): the controller ends its term once its own clock agrees the lease ran out.`,
          },
    );
  }
  // 3: What decide waits for (or that it would grant now).
  const grant = dec.actions.find((a) => a.type === 'Grant');
  const notConfigured = unactionable(obs, dec);
  const t = dec.tampered;
  if (t !== undefined && dec.waiting !== 'TokenRegressed')
    out.push({
      code: 'TokenRegressed',
      message: `The Lease's fencing-token annotation is ${describeTamper(t)}: someone other than the controller wrote it. The next grant takes a token above ${t.floor}; the lock shows Ready=False (LeaseTampered) until then.`,
    });
  if (notConfigured !== undefined) {
    out.push({
      code: 'FencingNotConfigured',
      message: `No grant: ${notConfigured}. Set spec.fencing.backend to Lease, or give the controller --redis-url.`,
    });
  } else if (dec.waiting !== undefined) {
    out.push(...waitingReasons(s, obs, dec, record, nowMs));
  } else if (dec.actions.some((a) => a.type === 'CreateLease')) {
    out.push({
      code: 'LeaseMissing',
      message: `The lock's Lease ${leaseName(lock.metadata.name ?? '')} does not exist; the controller creates it (if it was deleted while held, the first grant then waits a full lease duration for the old holder to step down).`,
    });
  } else if (grant !== undefined) {
    out.push({
      code: 'GrantPending',
      message: `By the controller's own rules the lock can be granted now, to pod ${grant.to.name}. The controller grants within moments of any change; if nobody holds it a few seconds from now, the controller is not acting on this lock (see Controller below).`,
    });
  }
  return out;
}

function waitingReasons(
  s: LockSnapshot,
  obs: Observation,
  dec: Decision,
  record: LockRecord | undefined,
  nowMs: number,
): Finding[] {
  const lock = s.lock;
  const keys = podKeys(lock.metadata.name ?? '');
  const ns = lock.metadata.namespace ?? '';
  const selector = lock.spec.candidates.selector;
  switch (dec.waiting) {
    case 'NoCandidates': {
      const selected = obs.pods.filter((p) => matchesSelector(selector, p.labels));
      if (selected.length === 0)
        return [
          {
            code: 'NoCandidatesSelected',
            message: `No pod in namespace ${ns} matches spec.candidates.selector (${selectorText(selector)}).`,
          },
        ];
      // Mutex: only pods that asked are candidates (decide's rule); Election: every selected pod.
      const mutex = lock.spec.mode === 'Mutex';
      const pool = mutex ? selected.filter((p) => requestedAt(p, keys) !== undefined) : selected;
      if (pool.length === 0)
        return [
          {
            code: 'NoRequests',
            message: `Mutex: none of the ${selected.length} pod${selected.length === 1 ? '' : 's'} matching the selector has asked for the lock (annotation ${keys.request}). A pod asks through its agent, acquire(), or fencepost exec; until one does, nobody holds a Mutex lock.`,
          },
        ];
      const eligible = pool.filter((p) => isCandidate(p, selector));
      if (eligible.length === 0)
        return [
          {
            code: 'CandidatesNotReady',
            message: `${pool.length} pod${pool.length === 1 ? '' : 's'} ${mutex ? 'asked for the lock' : `match${pool.length === 1 ? 'es' : ''} the selector`}, but none is a candidate: ${pool.map(podState).join(', ')}. The controller grants only Ready pods that are not terminating.`,
          },
        ];
      return [];
    }
    case 'LockDelay': {
      const delayMs = obs.timings.lockDelayMs;
      const leftMs = obs.lease !== undefined ? delayMs - (nowMs - obs.lease.observedAtMs) : delayMs;
      const last = record?.lastHolder?.name ?? record?.holder?.name;
      return [
        {
          code: 'LockDelay',
          message: `The last holder${last !== undefined ? ` (pod ${last})` : ''} ${record?.released === 'Terminated' ? 'was terminated' : record?.released === 'Revoked' ? 'was force-released (kubectl fencepost release --force)' : 'stopped renewing'}; spec.lockDelaySeconds (${delayMs / 1000}s) holds the next grant back${leftMs > 0 ? `, about ${humanDuration(leftMs)} more by this machine's clock` : ''}.`,
        },
      ];
    }
    case 'FencingUnavailable':
      return [
        {
          code: 'FencingUnavailable',
          message: `The fencing backend cannot issue tokens, so nothing new is granted: ${obs.fencing.detail ?? 'not ready'}.`,
        },
      ];
    case 'LeaseLost':
      return [
        {
          code: 'LeaseLost',
          message: `The lock's Lease was deleted while held; the controller waits a full lease duration (and spec.lockDelaySeconds) before the next grant, since the old holder${record?.lastHolder !== undefined ? `, pod ${record.lastHolder.name},` : ''} may still believe it holds the lock.`,
        },
      ];
    case 'TokenRegressed':
      return [
        {
          code: 'TokenRegressed',
          message: `No fencing token is left to issue: the Lease's fencing token (${record?.token?.toString() ?? '?'}) or status.fencingToken (${lock.status?.fencingToken ?? '?'}) is at the largest token, 2^63-1 (someone raised it). No grant until it is set back below it.`,
        },
      ];
    case 'LeaseNotRecorded':
      return [
        {
          code: 'LeaseNotRecorded',
          message:
            'The controller is recording the new Lease in status before the first grant (this passes by itself).',
        },
      ];
    case 'TamperedTerm':
      return [
        {
          code: 'LeaseLost',
          message: `The Lease's token was lowered and its holder cleared by someone other than the controller; the controller waits a full lease duration before the next grant, since the last holder status recorded (pod ${lock.status?.holder?.name ?? '?'}) may still believe it holds the lock.`,
        },
      ];
    case 'CacheNotSynced':
    case undefined:
      return [];
  }
}

/** podReasons: why the pod is not the holder, or that it is. */
export function podReasons(
  input: { readonly name: string; readonly object: V1Pod | undefined },
  obs: Observation,
  dec: Decision,
  record: LockRecord | undefined,
): Finding[] {
  const lock = obs.lock;
  const ns = lock.metadata.namespace ?? '';
  if (input.object === undefined) return [{ code: 'PodNotFound', message: `No pod ${input.name} in namespace ${ns}.` }];
  const p = summarizePod(input.object);
  const holder = record?.holder;
  const selector = lock.spec.candidates.selector;
  const keys = podKeys(lock.metadata.name ?? '');
  if (sameHolder(p.ref, holder))
    return [
      {
        code: 'PodIsHolder',
        message: `Pod ${p.ref.name} holds the lock (fencing token ${record?.token?.toString() ?? '?'}).`,
      },
    ];
  const out: Finding[] = [];
  if (holder !== undefined && holder.name === p.ref.name)
    out.push({
      code: 'PodOldIncarnation',
      message: `The Lease names an earlier pod of the same name (uid ${holder.uid}); this pod (uid ${p.ref.uid}) is a new incarnation, a different holder that needs a grant of its own.`,
    });
  if (!matchesSelector(selector, p.labels)) {
    out.push({
      code: 'PodNotSelected',
      message: `Pod ${p.ref.name} is not a candidate: its labels (${selectorText({ matchLabels: p.labels }) || 'none'}) do not match spec.candidates.selector (${selectorText(selector)}).`,
    });
    return out;
  }
  if (p.terminating)
    out.push({
      code: 'PodTerminating',
      message: `Pod ${p.ref.name} is terminating; the controller grants no terminating pod.`,
    });
  else if (p.terminated)
    out.push({
      code: 'PodTerminated',
      message: `The kubelet reports every container of pod ${p.ref.name} terminated.`,
    });
  else if (!p.ready) {
    const phase = input.object.status?.phase ?? 'unknown';
    const readyCond = input.object.status?.conditions?.find((c) => c.type === 'Ready')?.status ?? 'absent';
    out.push({
      code: 'PodNotReady',
      message: `Pod ${p.ref.name} is not Ready (phase ${phase}, Ready condition ${readyCond}); the controller grants only Ready pods.`,
    });
  }
  const mutex = lock.spec.mode === 'Mutex';
  if (mutex && requestedAt(p, keys) === undefined)
    out.push({
      code: 'PodNotRequested',
      message: `Mutex: pod ${p.ref.name} has not asked for the lock: it lacks the annotation ${keys.request}, which its agent writes when the app asks (acquire(), fencepost exec, or the agent's HTTP API).`,
    });
  if (out.length > 0) return out;
  // An eligible candidate: where it stands.
  const waiting = dec.candidates.filter((c) => !sameHolder(c.ref, holder));
  const place = waiting.findIndex((c) => sameHolder(c.ref, p.ref));
  const grant = dec.actions.find((a) => a.type === 'Grant');
  if (grant !== undefined && sameHolder(grant.to, p.ref))
    return [{ code: 'PodNextInLine', message: `Pod ${p.ref.name} is the one the controller grants next.` }];
  const ahead = place > 0 ? waiting.slice(0, place).map((c) => c.ref.name) : [];
  const behind =
    holder !== undefined ? `pod ${holder.name} holds the lock` : 'nobody holds the lock (see the reasons above)';
  const order = mutex
    ? `it is #${place + 1} in the queue${ahead.length > 0 ? `, behind ${ahead.join(', ')}` : ''} (granted in the order the controller first saw each request)`
    : `${holder !== undefined ? 'an Election lock keeps its holder until it releases, stops renewing or terminates; ' : ''}it is #${place + 1} in the order of the next grant (highest fencepost.io/priority first, then oldest pod first${record?.lastHolder !== undefined ? ', the last holder last' : ''})`;
  return [{ code: 'PodWaiting', message: `Pod ${p.ref.name} is an eligible candidate, but ${behind}: ${order}.` }];
}
