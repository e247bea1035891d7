import { beforeAll, describe, expect, it } from 'vitest';
import { parseLease } from '../../../src/lease/record.ts';
import { PRIORITY_ANNOTATION } from '../../../src/protocol/names.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { eventually } from '../../support/env.ts';
import { createLock, getLease, lockBody, releaseLease, setPodStatus, type TestKube } from '../../support/fixtures.ts';

// Candidate priority (fencepost.io/priority on the pod) orders Election grants, against the real
// API server: the controller in-process, the pods Ready through the status subresource.
describe('candidate priority in Election mode', () => {
  const fx = useLockController('priority-');
  let t: TestKube;
  beforeAll(() => {
    t = fx.t;
  });

  const podWith = async (name: string, app: string, priority?: string): Promise<void> => {
    await t.core.createNamespacedPod({
      namespace: t.namespace,
      body: {
        metadata: {
          name,
          labels: { app },
          ...(priority !== undefined ? { annotations: { [PRIORITY_ANNOTATION]: priority } } : {}),
        },
        spec: { containers: [{ name: 'app', image: 'example.invalid/app:1' }] },
      },
    });
    await setPodStatus(t, name, 'ready');
  };
  const holderName = async (lock: string): Promise<string | undefined> => {
    const lease = await getLease(t, lock);
    return lease !== undefined ? parseLease(lease).holder?.name : undefined;
  };

  it('grants the highest priority first, then by age; an invalid value counts as 0 with a Warning Event naming pod, annotation and value', async () => {
    await podWith('p-a-old', 'p'); // oldest, priority 0
    await podWith('p-z-bad', 'p', 'urgent'); // invalid: 0, and an Event
    await podWith('p-new', 'p', '10'); // youngest, highest priority
    await createLock(t, lockBody('p', 'p', { leaseDurationSeconds: 30 }));
    await eventually(async () => expect(await holderName('p')).toBe('p-new'));
    await eventually(async () => {
      const events = await t.core.listNamespacedEvent({ namespace: t.namespace });
      const e = events.items.find((x) => x.reason === 'InvalidPriority' && x.involvedObject.name === 'p');
      expect(e?.type).toBe('Warning');
      expect(e?.message).toContain('p-z-bad');
      expect(e?.message).toContain(PRIORITY_ANNOTATION);
      expect(e?.message).toContain('"urgent"');
    });
    // The holder releases: the two at 0 tie (creationTimestamp has whole seconds, so the existing
    // order falls to the name here), and the invalid value moved nobody ahead.
    await releaseLease(t, 'p');
    await eventually(async () => expect(await holderName('p')).toBe('p-a-old'));
  });
});
