import { describe, expect, it } from 'vitest';
import {
  ConditionType,
  EventReason,
  Reason,
  findCondition,
  setCondition,
} from '../../../src/api/v1alpha1/conditions.ts';
import type { Condition } from '../../../src/api/v1alpha1/distributedlock.ts';

const earlier = '2024-05-01T12:00:00Z';
const now = new Date('2024-05-01T12:05:00.789Z');
const nowString = '2024-05-01T12:05:00Z';

const ready = (status: Condition['status'], extra: Partial<Condition> = {}): Condition => ({
  type: ConditionType.Ready,
  status,
  observedGeneration: 1,
  lastTransitionTime: earlier,
  reason: Reason.Granted,
  message: 'Held by pod-a.',
  ...extra,
});
const held: Condition = {
  type: ConditionType.Held,
  status: 'True',
  observedGeneration: 1,
  lastTransitionTime: earlier,
  reason: Reason.Granted,
  message: 'Held by pod-a.',
};

describe('setCondition', () => {
  it.each<{ name: string; list: Condition[]; set: Omit<Condition, 'lastTransitionTime'>; want: Condition[] }>([
    {
      name: 'a new type is appended with the transition time now, at second precision',
      list: [held],
      set: {
        type: ConditionType.Ready,
        status: 'Unknown',
        observedGeneration: 2,
        reason: Reason.Initializing,
        message: '',
      },
      want: [
        held,
        {
          type: 'Ready',
          status: 'Unknown',
          observedGeneration: 2,
          reason: 'Initializing',
          message: '',
          lastTransitionTime: nowString,
        },
      ],
    },
    {
      name: 'an unchanged status keeps its transition time while reason, message and generation are updated',
      list: [ready('True'), held],
      set: {
        type: ConditionType.Ready,
        status: 'True',
        observedGeneration: 3,
        reason: Reason.HolderExpired,
        message: 'Held by pod-b.',
      },
      want: [ready('True', { observedGeneration: 3, reason: 'HolderExpired', message: 'Held by pod-b.' }), held],
    },
    {
      name: 'a changed status moves the transition time to now and keeps the position in the list',
      list: [ready('True'), held],
      set: {
        type: ConditionType.Ready,
        status: 'False',
        observedGeneration: 1,
        reason: Reason.RedisUnavailable,
        message: 'Redis is down.',
      },
      want: [
        ready('False', { reason: 'RedisUnavailable', message: 'Redis is down.', lastTransitionTime: nowString }),
        held,
      ],
    },
    {
      name: 'an observedGeneration omitted from the new condition is dropped, as metav1 does',
      list: [ready('True')],
      set: { type: ConditionType.Ready, status: 'True', reason: Reason.Granted, message: 'Held by pod-a.' },
      want: [
        { type: 'Ready', status: 'True', lastTransitionTime: earlier, reason: 'Granted', message: 'Held by pod-a.' },
      ],
    },
    {
      name: 'an empty list gets its first condition',
      list: [],
      set: {
        type: ConditionType.Degraded,
        status: 'False',
        observedGeneration: 1,
        reason: Reason.AsExpected,
        message: '',
      },
      want: [
        {
          type: 'Degraded',
          status: 'False',
          observedGeneration: 1,
          reason: 'AsExpected',
          message: '',
          lastTransitionTime: nowString,
        },
      ],
    },
  ])('$name', ({ list, set, want }) => {
    expect(setCondition(list, set, now)).toEqual(want);
  });

  it('does not modify the list or the conditions it was given', () => {
    const list = Object.freeze([Object.freeze(ready('True')), Object.freeze(held)]);
    const before = structuredClone(list);
    const after = setCondition(
      list,
      { type: ConditionType.Ready, status: 'False', reason: Reason.InvalidSpec, message: 'Bad.' },
      now,
    );
    expect(list).toEqual(before);
    expect(after).not.toBe(list);
  });
});

describe('findCondition', () => {
  it.each([
    { name: 'finds the condition of the given type', list: [ready('True'), held], type: 'Held', want: held },
    { name: 'returns undefined when no condition has the type', list: [held], type: 'Ready', want: undefined },
    { name: 'returns undefined for a status without conditions', list: undefined, type: 'Ready', want: undefined },
  ])('$name', ({ list, type, want }) => {
    expect(findCondition(list, type)).toEqual(want);
  });
});

describe('EventReason', () => {
  // Alerts, runbooks and `kubectl get events --field-selector reason=…` match on these strings:
  // renaming one is a breaking change, so the table is pinned here and in docs/controller.md.
  it('is the documented, stable set of Event reasons', () => {
    expect(Object.values(EventReason).sort()).toEqual([
      'CompletionRefused',
      'FencingAvailable',
      'FencingRefloored',
      'FencingUnavailable',
      'ForceReleased',
      'HandoverCompleted',
      'HandoverRefused',
      'HandoverStarted',
      'HandoverTimedOut',
      'HolderExpired',
      'HolderTerminated',
      'InvalidPriority',
      'LeaseGranted',
      'LeaseLost',
      'LeaseTampered',
      'LockLost',
      'StoreGranted',
      'StoreReleased',
    ]);
    for (const [key, value] of Object.entries(EventReason)) expect(value).toBe(key);
  });
});
