// The fencepost.io/v1alpha1 DistributedLock API. Its shapes — the spec and status interfaces, the
// enums, the schema's names, defaults and bounds — are generated from
// crds/distributedlocks.fencepost.io.yaml, the one source of the schema, into
// distributedlock-schema.ts (hack/gen-protocol.ts; test/unit/api/crd-drift.test.ts fails while
// that file is stale). This module adds what the schema cannot state: the object type, the
// validation rules' messages by name, and the derived timings.
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { DEFAULT_LEASE_DURATION_SECONDS, termTimingsOf, type TermTimings } from '../../protocol/timings.ts';
import type { KIND } from './distributedlock-schema.ts';
import {
  GROUP,
  LockStoreKind,
  PLURAL,
  VERSION,
  type DistributedLockSpec,
  type DistributedLockStatus,
} from './distributedlock-schema.ts';

export * from './distributedlock-schema.ts';

/** API_VERSION is the `apiVersion` field of every DistributedLock: `fencepost.io/v1alpha1`. */
export const API_VERSION = `${GROUP}/${VERSION}`;

/** CRD_NAME is the name of the CustomResourceDefinition object: `<plural>.<group>`. */
export const CRD_NAME = `${PLURAL}.${GROUP}`;

/** DEFAULT_LEASE_DURATION_SECONDS is the schema default of `spec.leaseDurationSeconds` (the protocol's default, which the agent assumes too). */
export { DEFAULT_LEASE_DURATION_SECONDS };

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

/** storeOf is a lock's store, the default filled in. */
export function storeOf(spec: DistributedLockSpec): LockStoreKind {
  return spec.store ?? LockStoreKind.Lease;
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
