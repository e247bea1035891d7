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
 */
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import { ConditionType, Reason, findCondition } from '../../api/v1alpha1/conditions.ts';
import {
  DEFAULT_MODE,
  resolveTimings,
  type DistributedLock,
  type LabelSelector,
} from '../../api/v1alpha1/distributedlock.ts';
import {
  decide,
  describeTamper,
  unactionable,
  type Decision,
  type FencingState,
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
import { DEFAULT_LEASE_DURATION_SECONDS, termTimingsOf } from '../../protocol/timings.ts';
import { humanDuration, timeMs } from './format.ts';
import type { ControllerLeaseView, LockSnapshot } from './snapshot.ts';
import { readRecord } from './status-view.ts';

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

/**
 * observation is the controller's Observation rebuilt from a snapshot. observedAtMs, which the
 * controller takes from its own clock, is the wall-clock time the Lease last changed: its
 * renewTime while held, else its last write (managedFields), else now (a wait just begun — the
 * conservative reading).
 */
export function observation(s: LockSnapshot, record: LockRecord | undefined, nowMs: number): Observation {
  const lock = s.lock;
  return {
    lock,
    timings: resolveTimings(lock.spec),
    lease: record !== undefined ? { record, observedAtMs: observedAt(s.lease, record, nowMs) } : undefined,
    pods: s.pods.map(summarizePod),
    podsSynced: true,
    fencing: fencingOf(lock),
    requests: lock.status?.queue ?? [],
  };
}

function observedAt(lease: V1Lease | undefined, record: LockRecord, nowMs: number): number {
  if (record.holder !== undefined && record.renewTime !== undefined) return record.renewTime.getTime();
  const written = lastWrite(lease);
  return written !== undefined && written <= nowMs ? written : nowMs;
}

/** lastWrite: when the API server last recorded a write of the Lease (its managedFields times), in ms. */
export function lastWrite(lease: V1Lease | undefined): number | undefined {
  const times = (lease?.metadata?.managedFields ?? []).map((f) => timeMs(f.time)).filter((t) => t !== undefined);
  return times.length > 0 ? Math.max(...times) : undefined;
}

/**
 * fencingOf reads the fencing backend's state from the lock's conditions, as the controller last
 * reported it: Degraded=True means it could not issue tokens; Ready=False with reason InvalidSpec
 * means the lock asks for a backend the controller was started without.
 */
export function fencingOf(lock: DistributedLock): FencingState {
  const conditions = lock.status?.conditions;
  const degraded = findCondition(conditions, ConditionType.Degraded);
  const ready = findCondition(conditions, ConditionType.Ready);
  const named = /Fencing backend (Redis|Lease)\b/.exec(degraded?.message ?? '')?.[1];
  const backend = lock.spec.fencing?.backend ?? (named === 'Redis' || named === 'Lease' ? named : 'Lease');
  const notConfigured = ready?.status === 'False' && ready.reason === Reason.InvalidSpec;
  const down = degraded?.status === 'True' || notConfigured;
  return {
    backend,
    ready: !down,
    ...(down ? { detail: (notConfigured ? ready.message : degraded?.message) ?? 'not ready' } : {}),
    ...(notConfigured ? { notConfigured: true } : {}),
  };
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

function lockReasons(
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

function podReasons(
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
