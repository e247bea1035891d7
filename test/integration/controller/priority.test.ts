import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLease } from '../../../src/lease/record.ts';
import { PRIORITY_ANNOTATION } from '../../../src/protocol/names.ts';
import { PREEMPT_READY_MS } from '../../../src/controllers/distributedlock/decide-handover.ts';
import { agentFleet, type AgentFleet, type AgentProcess } from '../../support/agent-processes.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { eventually } from '../../support/env.ts';
import { createLock, getLease, lockBody, releaseLease, setPodStatus, type TestKube } from '../../support/fixtures.ts';

// Candidate priority (fencepost.io/priority on the pod) orders Election grants, and with
// spec.preemption: HigherPriority moves the lock to a higher-priority candidate by a planned
// handover — against the real API server: the controller in-process, the pods Ready through the
// status subresource, and (for preemption) the pods' agents as real processes.
describe('candidate priority in Election mode', () => {
  const fx = useLockController('priority-');
  let t: TestKube;
  let fleet: AgentFleet;
  beforeAll(() => {
    t = fx.t;
    fleet = agentFleet(t.namespace, 'priority');
  });
  afterAll(() => fleet.stopAll());

  const podWith = async (name: string, app: string, priority?: string): Promise<V1Pod> => {
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
    return setPodStatus(t, name, 'ready');
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

  /** heldToken waits until the agent holds the lock and returns its token. */
  const heldToken = (a: AgentProcess): Promise<bigint> =>
    eventually(async () => {
      const s = await a.snapshot();
      expect(s.held).toBe(true);
      return BigInt(s.token ?? '0');
    }, 45_000);

  it('preemption: a strictly higher-priority candidate Ready for 10 s gets the lock by a planned handover; an equal one never does', async () => {
    const low = await podWith('q-low', 'q');
    const aLow = await fleet.start('q', 'q-low', low.metadata?.uid ?? '');
    await createLock(
      t,
      lockBody('q', 'q', { leaseDurationSeconds: 4, preemption: 'HigherPriority', handover: { drainSeconds: 1 } }),
    );
    const first = await heldToken(aLow);

    // A higher-priority pod turns Ready: nothing moves until it has been Ready PREEMPT_READY_MS.
    const high = await podWith('q-high', 'q', '10');
    const readyAt = Date.now();
    const aHigh = await fleet.start('q', 'q-high', high.metadata?.uid ?? '');
    await new Promise((r) => setTimeout(r, PREEMPT_READY_MS / 2));
    expect((await aLow.snapshot()).held).toBe(true);
    expect((await getLease(t, 'q'))?.spec?.holderIdentity).toContain('q-low');

    const second = await heldToken(aHigh);
    // The Ready condition's lastTransitionTime has whole seconds: allow one second of rounding.
    expect(Date.now() - readyAt).toBeGreaterThanOrEqual(PREEMPT_READY_MS - 1000);
    expect(second).toBeGreaterThan(first);
    expect((await aLow.snapshot()).held).toBe(false);
    await eventually(async () => {
      const events = await t.core.listNamespacedEvent({ namespace: t.namespace });
      const started = events.items.find((e) => e.reason === 'HandoverStarted' && e.involvedObject.name === 'q');
      expect(started?.message).toContain("q-high has priority 10, above the holder's 0");
    });

    // An equal-priority candidate, Ready for longer than the hysteresis, never preempts: the
    // holder and its token stay, and the Lease carries no handover mark.
    const peer = await podWith('q-peer', 'q', '10');
    await fleet.start('q', 'q-peer', peer.metadata?.uid ?? '');
    await new Promise((r) => setTimeout(r, PREEMPT_READY_MS + 3000));
    const lease = await getLease(t, 'q');
    if (lease === undefined) throw new Error('the Lease of lock q is gone');
    const after = parseLease(lease);
    expect(after.holder?.name).toBe('q-high');
    expect(after.token).toBe(second);
    expect(after.handover).toBeUndefined();
    expect((await aHigh.snapshot()).held).toBe(true);
  }, 120_000);
});
