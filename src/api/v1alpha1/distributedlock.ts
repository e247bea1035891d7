// The fencepost.io/v1alpha1 DistributedLock API, hand-written to match
// crds/distributedlocks.fencepost.io.yaml, which is the source of truth. SPEC_SHAPE and
// STATUS_SHAPE below tie these types to that file: the type checker fails when a field is added
// to a type but not to its shape, and test/unit/api/crd-drift.test.ts fails when the CRD and the
// shapes differ.
import type { V1ObjectMeta } from '@kubernetes/client-node';
import type { HolderRef } from '../../protocol/holder.ts';
import { DEFAULT_LEASE_DURATION_SECONDS, termTimingsOf, type TermTimings } from '../../protocol/timings.ts';

/** GROUP is the API group of DistributedLock. */
export const GROUP = 'fencepost.io';

/** VERSION is the one served and stored API version of DistributedLock. */
export const VERSION = 'v1alpha1';

/** API_VERSION is the `apiVersion` field of every DistributedLock: `fencepost.io/v1alpha1`. */
export const API_VERSION = `${GROUP}/${VERSION}`;

/** KIND is the `kind` field of every DistributedLock. */
export const KIND = 'DistributedLock';

/** PLURAL is the resource name in API paths (`/apis/fencepost.io/v1alpha1/namespaces/<ns>/distributedlocks`). */
export const PLURAL = 'distributedlocks';

/** SINGULAR is the singular resource name, as accepted by kubectl. */
export const SINGULAR = 'distributedlock';

/** SHORT_NAME is the kubectl short name (`kubectl get dlock`). */
export const SHORT_NAME = 'dlock';

/** CRD_NAME is the name of the CustomResourceDefinition object: `<plural>.<group>`. */
export const CRD_NAME = `${PLURAL}.${GROUP}`;

/**
 * LockMode is how a lock is shared. `Election`: one long-lived holder among the ready candidates,
 * replaced only when it releases, expires or terminates. `Mutex`: candidates ask for the lock,
 * hold it while they work and release it, granted in FIFO order of asking (the order in
 * which the controller first saw the requests: status.queue). `Semaphore`: as Mutex, but up to
 * `spec.permits` holders at once, each on its own permit Lease with its own token.
 */
export const LockMode = { Election: 'Election', Mutex: 'Mutex', Semaphore: 'Semaphore' } as const;
/** LockMode is one of the values of the LockMode constant. */
export type LockMode = (typeof LockMode)[keyof typeof LockMode];

/**
 * FencingBackend is where fencing tokens come from. `Redis`: an INCR counter in Redis, re-floored
 * on every grant from the high-water mark on the Lease. `Lease`: the high-water mark on the Lease
 * itself, incremented in the compare-and-swap that assigns the holder.
 */
export const FencingBackend = { Redis: 'Redis', Lease: 'Lease' } as const;
/** FencingBackend is one of the values of the FencingBackend constant. */
export type FencingBackend = (typeof FencingBackend)[keyof typeof FencingBackend];

/** LabelSelectorOperator is the operator of a LabelSelectorRequirement (metav1 semantics). */
export const LabelSelectorOperator = {
  In: 'In',
  NotIn: 'NotIn',
  Exists: 'Exists',
  DoesNotExist: 'DoesNotExist',
} as const;
/** LabelSelectorOperator is one of the values of the LabelSelectorOperator constant. */
export type LabelSelectorOperator = (typeof LabelSelectorOperator)[keyof typeof LabelSelectorOperator];

/** ConditionStatus is the status of a Condition. */
export type ConditionStatus = 'True' | 'False' | 'Unknown';

/** DEFAULT_LEASE_DURATION_SECONDS is the schema default of `spec.leaseDurationSeconds` (the protocol's default, which the agent assumes too). */
export { DEFAULT_LEASE_DURATION_SECONDS };

/** DEFAULT_MODE is the schema default of `spec.mode`. */
export const DEFAULT_MODE: LockMode = LockMode.Election;

/**
 * MAX_PERMITS bounds `spec.permits` (the CRD's maximum): the controller reads every permit Lease of
 * a lock on each reconcile, and status lists every holder, so both stay bounded. Easier to raise
 * later than to lower.
 */
export const MAX_PERMITS = 1000;

/** DEFAULT_HANDOFF_ON_POD_TERMINATED is the schema default of `spec.handoff.onPodTerminated`. */
export const DEFAULT_HANDOFF_ON_POD_TERMINATED = true;

/**
 * FENCING_TOKEN_PATTERN matches a well-formed fencing token on the wire: a decimal integer
 * without sign or leading zeros. It is the CRD's pattern for `status.fencingToken`; parse matching
 * strings with `BigInt`, never `Number` (tokens can exceed 2^53).
 */
export const FENCING_TOKEN_PATTERN = /^(0|[1-9][0-9]*)$/;

/**
 * ValidationMessage holds the message of every validation rule (x-kubernetes-validations) in the
 * CRD, so that tests and the controller's InvalidSpec condition can refer to them without copying
 * strings. The API server reports them as `<field>: Invalid value: ...: <message>`. The drift test
 * fails unless the CRD carries exactly these messages.
 */
export const ValidationMessage = {
  nameTooLong:
    "metadata.name must be at most 63 characters long, because it is used in label values and in the name of the lock's Lease",
  renewDeadlineNotBelowLease: 'spec.renewDeadlineSeconds must be less than spec.leaseDurationSeconds',
  renewPeriodNotBelowDeadline: 'spec.renewPeriodSeconds must be less than spec.renewDeadlineSeconds',
  renewPeriodNotBelowDefaultDeadline:
    'spec.renewPeriodSeconds must be less than the default renew deadline, two thirds of spec.leaseDurationSeconds, when spec.renewDeadlineSeconds is not set',
  emptySelector:
    'spec.candidates.selector must set at least one of matchLabels or matchExpressions: an empty selector would match every pod in the namespace',
  labelKeyLength: 'spec.candidates.selector.matchLabels keys must be between 1 and 317 characters long',
  valuesRequired: 'spec.candidates.selector.matchExpressions[].values must be non-empty when operator is In or NotIn',
  valuesForbidden:
    'spec.candidates.selector.matchExpressions[].values must be empty when operator is Exists or DoesNotExist',
  fencingKeyWithoutRedis: 'spec.fencing.key may only be set when spec.fencing.backend is Redis or unset',
  permitsRequired: 'spec.permits is required when spec.mode is Semaphore',
  permitsWithoutSemaphore: 'spec.permits may only be set when spec.mode is Semaphore',
  semaphoreModeChange:
    'spec.mode cannot change to or from Semaphore on an existing lock: delete the lock and create it again',
  storeSemaphore: 'spec.mode Semaphore needs spec.store Lease: a Redis or Redlock store lock has one holder at a time',
  storeFencing:
    'spec.fencing is for spec.store Lease: a Redis or Redlock store issues the fencing token with the grant itself',
  storeLockDelay:
    'spec.lockDelaySeconds is for spec.store Lease: the controller does not grant a Redis or Redlock store lock',
  storePreemption:
    'spec.preemption is for spec.store Lease: the controller does not grant a Redis or Redlock store lock',
  storeRenewTimings:
    'spec.renewDeadlineSeconds and spec.renewPeriodSeconds are for spec.store Lease: a store lock renews every third of spec.leaseDurationSeconds (its TTL) and trusts a grant for the TTL less 1 % + 2 ms',
  storeChange:
    'spec.store cannot change on an existing lock: its holders would be in two systems at once; create a new lock',
} as const;

/**
 * LabelSelectorRequirement is one requirement of a LabelSelector (metav1.LabelSelectorRequirement).
 * `values` must be non-empty for In and NotIn and empty or unset for Exists and DoesNotExist;
 * the CRD enforces this at admission.
 */
export interface LabelSelectorRequirement {
  readonly key: string;
  readonly operator: LabelSelectorOperator;
  readonly values?: readonly string[];
}

/**
 * LabelSelector is a metav1.LabelSelector: matchLabels and matchExpressions are ANDed. The CRD
 * rejects an empty selector on a lock, since it would match every pod in the namespace.
 */
export interface LabelSelector {
  readonly matchLabels?: Readonly<Record<string, string>>;
  readonly matchExpressions?: readonly LabelSelectorRequirement[];
}

/** CandidatesSpec selects the pods, in the lock's namespace, that may hold the lock. */
export interface CandidatesSpec {
  /** selector is required and must not be empty. */
  readonly selector: LabelSelector;
}

/** FencingSpec configures where fencing tokens come from. */
export interface FencingSpec {
  /**
   * backend has no schema default: when unset the controller uses Redis if it was configured with
   * a Redis URL and Lease otherwise.
   */
  readonly backend?: FencingBackend;
  /** key names the Redis counter within the lock namespace: `fencepost:fence:<namespace>/<key>` (default: the lock name). Redis backend only. */
  readonly key?: string;
}

/** HandoffSpec controls re-granting a lock without waiting for its lease to expire. */
export interface HandoffSpec {
  /**
   * onPodTerminated re-grants without waiting for expiry when the kubelet reports every container
   * of the holder pod terminated — containers, init containers (native sidecars included) and
   * ephemeral containers; the pod's phase alone never counts (allContainersTerminated in
   * src/controllers/distributedlock/pods.ts). lockDelaySeconds still applies. Defaults to true
   * (DEFAULT_HANDOFF_ON_POD_TERMINATED).
   */
  readonly onPodTerminated?: boolean;
}

/** HandoverSpec configures planned handovers (protocol/handover.ts; docs/controller.md#planned-handover). */
export interface HandoverSpec {
  /**
   * drainSeconds: how long the holder's agent lets the app drain before it releases to the chosen
   * pod, 0..MAX_DRAIN_SECONDS; a request may override it within the same bounds. Defaults to
   * DEFAULT_DRAIN_SECONDS (30).
   */
  readonly drainSeconds?: number;
}

/**
 * DistributedLockSpec is the user-owned desired behaviour of a lock. Durations are whole seconds.
 * Fields with a schema default (leaseDurationSeconds, mode, handoff) are always present on objects
 * read from the API server but optional here, because objects written by clients may omit them;
 * use resolveTimings and the DEFAULT_* constants rather than reading them raw.
 */
export interface DistributedLockSpec {
  /** leaseDurationSeconds: grant validity without renewal, seconds, 1..3600. Defaults to 15. */
  readonly leaseDurationSeconds?: number;
  /** renewDeadlineSeconds: < leaseDurationSeconds. Defaults to two thirds of the lease (see resolveTimings). */
  readonly renewDeadlineSeconds?: number;
  /** renewPeriodSeconds: < renew deadline. Defaults to a third of the lease or half the deadline, whichever is shorter. */
  readonly renewPeriodSeconds?: number;
  /** candidates is required. */
  readonly candidates: CandidatesSpec;
  /** mode defaults to Election. It cannot change to or from Semaphore on an existing lock. */
  readonly mode?: LockMode;
  /**
   * permits: Semaphore mode only (required there, refused otherwise), how many pods may hold the
   * lock at once, 1..MAX_PERMITS. May change on a live lock; shrinking never revokes a grant, it
   * waits for holders to leave.
   */
  readonly permits?: number;
  /** fencing defaults to the controller's backend choice and the default key. */
  readonly fencing?: FencingSpec;
  /**
   * lockDelaySeconds: wait after every involuntary handover (expiry, or the holder's containers
   * terminated; not a release) before the next grant, seconds, 0..3600. Defaults to 0.
   */
  readonly lockDelaySeconds?: number;
  /** handoff defaults to `{ onPodTerminated: true }`. */
  readonly handoff?: HandoffSpec;
  /** handover defaults to `{ drainSeconds: 30 }`. */
  readonly handover?: HandoverSpec;
  /**
   * preemption (Election mode): `HigherPriority` makes a candidate of strictly higher priority than
   * the holder's, Ready for PREEMPT_READY_MS, trigger a planned handover to it. Defaults to `Never`.
   */
  readonly preemption?: Preemption;
  /**
   * store: where the lock is held (docs/stores.md). `Lease` (the default): granted by the
   * controller. `Redis`, `Redlock`: taken by the holders in Redis; the controller observes them.
   * Cannot change on an existing lock.
   */
  readonly store?: LockStoreKind;
}

/** LockStoreKind is where a lock is held (spec.store). */
export const LockStoreKind = { Lease: 'Lease', Redis: 'Redis', Redlock: 'Redlock' } as const;
/** LockStoreKind is one of the values of the LockStoreKind constant. */
export type LockStoreKind = (typeof LockStoreKind)[keyof typeof LockStoreKind];

/** storeOf is a lock's store, the default filled in. */
export function storeOf(spec: DistributedLockSpec): LockStoreKind {
  return spec.store ?? LockStoreKind.Lease;
}

/** Preemption is when a higher-priority candidate takes an Election lock over (spec.preemption). */
export const Preemption = { Never: 'Never', HigherPriority: 'HigherPriority' } as const;
/** Preemption is one of the values of the Preemption constant. */
export type Preemption = (typeof Preemption)[keyof typeof Preemption];

/** CompletedRun is one run id that a holder recorded completed on the lock's Lease (Mutex mode, run-once-per-window). */
export interface CompletedRun {
  readonly runId: string;
  /** completedAt: the completing agent's wall clock when it recorded the run (RFC 3339). */
  readonly completedAt: string;
  readonly holder?: string;
  /** token: the fencing token of the term that did the run (decimal string). */
  readonly token?: string;
}

/** PermitHolderStatus is one entry of status.holders: a Semaphore permit and the pod that holds it. */
export interface PermitHolderStatus {
  readonly permit: number;
  readonly name: string;
  readonly uid: string;
  /** token: the fencing token of this permit's grant (decimal string). */
  readonly token: string;
  readonly acquireTime?: string;
  readonly leaseDurationSeconds?: number;
}

/** MAX_QUEUED_REQUESTS bounds status.queue (the CRD's maxItems). */
export const MAX_QUEUED_REQUESTS = 100;

/**
 * QueuedRequest is one Mutex request in the controller's record of the queue (status.queue). The
 * record's order is the grant order: the order in which the controller first saw the requests.
 */
export interface QueuedRequest {
  /** pod and uid name the requesting pod incarnation. */
  readonly pod: string;
  readonly uid: string;
  /** since: when the controller first saw the request, by its own clock (RFC 3339). Informational: the order is the list's. */
  readonly since: string;
  /**
   * requestTime: the pod's request annotation as first seen (RFC 3339, normalised). Informational:
   * the pod wrote it, so it orders nothing (it breaks ties only among requests with no record).
   */
  readonly requestTime: string;
}

/**
 * Condition is a metav1.Condition. `lastTransitionTime` is an RFC 3339 string and changes only
 * when `status` does; use setCondition from conditions.ts to maintain a list of them.
 */
export interface Condition {
  readonly type: string;
  readonly status: ConditionStatus;
  readonly observedGeneration?: number;
  readonly lastTransitionTime: string;
  readonly reason: string;
  readonly message: string;
}

/**
 * DistributedLockStatus is the controller-owned observed state of a lock, recomputed from the
 * Lease and the candidate pods. It records transitions, not renewals: nothing in it changes while
 * the holder renews (the live renewTime and expiry are on the Lease; expiry is judged on the
 * controller's monotonic clock anyway). Times are RFC 3339 strings. `fencingToken` is a decimal
 * string matching FENCING_TOKEN_PATTERN: convert with `BigInt`, never `Number`.
 */
export interface DistributedLockStatus {
  readonly holder?: HolderRef;
  readonly fencingToken?: string;
  readonly acquireTime?: string;
  /** leaseDurationSeconds: the lease duration of the current grant (the Lease's), while held. */
  readonly leaseDurationSeconds?: number;
  readonly leaseTransitions?: number;
  readonly leaseName?: string;
  /** candidates is the number of eligible candidate pods. */
  readonly candidates?: number;
  /** queueLength is the number of waiting candidates in Mutex mode; 0 in Election mode. */
  readonly queueLength?: number;
  /** heldPermits: Semaphore mode, how many pods hold a permit now (may exceed spec.permits after a shrink). */
  readonly heldPermits?: number;
  /** holders: Semaphore mode, the pods that hold a permit, by permit (from the permit Leases). */
  readonly holders?: readonly PermitHolderStatus[];
  /** completedRuns: run ids recorded completed on the Lease in Mutex mode, in the order recorded (newest last), at most 32. */
  readonly completedRuns?: readonly CompletedRun[];
  /**
   * queue: Mutex mode, the pods that asked and wait (not the holder), in the order they will be
   * granted — the order in which the controller first saw each request — at most 100.
   */
  readonly queue?: readonly QueuedRequest[];
  readonly observedGeneration?: number;
  readonly conditions?: readonly Condition[];
}

/**
 * DistributedLock is a fencepost.io/v1alpha1 DistributedLock object as stored by the API server.
 * Objects from informers are shared cache entries: clone them before changing anything.
 */
export interface DistributedLock {
  readonly apiVersion: typeof API_VERSION;
  readonly kind: typeof KIND;
  readonly metadata: V1ObjectMeta;
  readonly spec: DistributedLockSpec;
  readonly status?: DistributedLockStatus;
}

// ----- Timings -----

/**
 * Timings are a lock's effective durations in milliseconds, after defaults. Invariants for a spec
 * that passed the CRD's validation: 0 < renewPeriodMs < renewDeadlineMs < leaseDurationMs, and
 * lockDelayMs >= 0.
 */
export interface Timings extends TermTimings {
  readonly lockDelayMs: number;
}

/**
 * resolveTimings applies the spec's duration defaults and converts them to milliseconds: the
 * timings of the lock's next term are the protocol's termTimingsOf with no Lease record yet
 * (lease default 15 s, renew deadline floor(2/3 of the lease), renew period
 * floor(min(lease / 3, renewDeadline / 2)); see src/protocol/timings.ts), and lockDelayMs is
 * lockDelaySeconds, default 0.
 *
 * Pure.
 *
 * Assumptions: the spec passed the CRD's validation (bounds and the ordering rules); this function
 * does not re-validate explicit values.
 */
export function resolveTimings(spec: DistributedLockSpec): Timings {
  return { ...termTimingsOf(undefined, spec), lockDelayMs: (spec.lockDelaySeconds ?? 0) * 1000 };
}

// ----- Schema shapes (drift check) -----

type NoKeys = Record<never, never>;

/**
 * SchemaNode is the shape of one field's schema: its OpenAPI type (`integer` for every TS number),
 * `map` for a string-to-string map (additionalProperties), a one-element tuple of the item shape
 * for an array, or a nested SchemaShape for an object.
 */
export type SchemaNode<V> = [V] extends [string]
  ? 'string'
  : [V] extends [number]
    ? 'integer'
    : [V] extends [boolean]
      ? 'boolean'
      : [V] extends [readonly (infer E)[]]
        ? readonly [SchemaNode<E>]
        : string extends keyof V
          ? 'map'
          : SchemaShape<V>;

/**
 * SchemaShape is the shape of an object type's schema: one key per property, spelled `name?` when
 * the property is optional (not in the schema's `required` list) and `name` when it is required.
 * An object literal that `satisfies SchemaShape<T>` must list every property of T exactly once,
 * with the right optionality, so the type checker catches a field added to T alone.
 */
export type SchemaShape<T> = {
  readonly [K in keyof T & string as NoKeys extends Pick<T, K> ? `${K}?` : K]-?: SchemaNode<NonNullable<T[K]>>;
};

/**
 * SPEC_SHAPE is the shape of `spec` in the CRD's openAPIV3Schema, checked against
 * DistributedLockSpec by the type checker and against the CRD by crd-drift.test.ts.
 */
export const SPEC_SHAPE = {
  'leaseDurationSeconds?': 'integer',
  'renewDeadlineSeconds?': 'integer',
  'renewPeriodSeconds?': 'integer',
  candidates: {
    selector: {
      'matchLabels?': 'map',
      'matchExpressions?': [{ key: 'string', operator: 'string', 'values?': ['string'] }],
    },
  },
  'mode?': 'string',
  'permits?': 'integer',
  'fencing?': { 'backend?': 'string', 'key?': 'string' },
  'lockDelaySeconds?': 'integer',
  'handoff?': { 'onPodTerminated?': 'boolean' },
  'handover?': { 'drainSeconds?': 'integer' },
  'preemption?': 'string',
  'store?': 'string',
} as const satisfies SchemaShape<DistributedLockSpec>;

/**
 * STATUS_SHAPE is the shape of `status` in the CRD's openAPIV3Schema, checked against
 * DistributedLockStatus by the type checker and against the CRD by crd-drift.test.ts.
 */
export const STATUS_SHAPE = {
  'holder?': { name: 'string', uid: 'string' },
  'fencingToken?': 'string',
  'acquireTime?': 'string',
  'leaseDurationSeconds?': 'integer',
  'leaseTransitions?': 'integer',
  'leaseName?': 'string',
  'candidates?': 'integer',
  'queueLength?': 'integer',
  'heldPermits?': 'integer',
  'holders?': [
    {
      permit: 'integer',
      name: 'string',
      uid: 'string',
      token: 'string',
      'acquireTime?': 'string',
      'leaseDurationSeconds?': 'integer',
    },
  ],
  'completedRuns?': [{ runId: 'string', completedAt: 'string', 'holder?': 'string', 'token?': 'string' }],
  'queue?': [{ pod: 'string', uid: 'string', since: 'string', requestTime: 'string' }],
  'observedGeneration?': 'integer',
  'conditions?': [
    {
      type: 'string',
      status: 'string',
      'observedGeneration?': 'integer',
      lastTransitionTime: 'string',
      reason: 'string',
      message: 'string',
    },
  ],
} as const satisfies SchemaShape<DistributedLockStatus>;

/**
 * shapePaths lists every field path of a shape, parents before children, in declaration order:
 * `spec.candidates`, `spec.candidates.selector`, ..., with `[]` for array items
 * (`status.conditions[].type`). Optionality markers are dropped.
 */
function shapePaths(shape: unknown, prefix: string): string[] {
  if (Array.isArray(shape)) return shapePaths(shape[0], `${prefix}[]`);
  if (typeof shape !== 'object' || shape === null) return [];
  const paths: string[] = [];
  for (const [key, node] of Object.entries(shape)) {
    const path = `${prefix}.${key.replace(/\?$/, '')}`;
    paths.push(path, ...shapePaths(node, path));
  }
  return paths;
}

/** SPEC_FIELD_PATHS is every field path under `spec`, e.g. `spec.candidates.selector.matchLabels`. */
export const SPEC_FIELD_PATHS: readonly string[] = shapePaths(SPEC_SHAPE, 'spec');

/** STATUS_FIELD_PATHS is every field path under `status`, e.g. `status.conditions[].reason`. */
export const STATUS_FIELD_PATHS: readonly string[] = shapePaths(STATUS_SHAPE, 'status');
