/**
 * Events against the real API server, recorded the way client-go records them:
 * - the same Event emitted N times is ONE Event with count N, its firstTimestamp from the first
 *   time and a later lastTimestamp;
 * - a flood beyond the object's burst (25) is dropped, whether the Events are identical or only
 *   similar (similar ones are combined into one "(combined from similar events)" Event);
 * - the controller reports a holder whose containers terminated as `HolderTerminated`, and one
 *   that stopped renewing as `HolderExpired`.
 *
 * The recorder's clock is a fake one, so that Events can be seconds apart (metav1.Time has second
 * precision) without the test sleeping; the API server stores whatever times the recorder sends.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api, type CoreV1Event } from '@kubernetes/client-node';
import { eventRecorder } from '../../../src/kube/events.ts';
import { COMBINED_PREFIX } from '../../../src/kube/event-correlator.ts';
import { parseLease } from '../../../src/lease/record.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { FakeClock } from '../../support/fake-clock.ts';
import { eventually, freshNamespace, sharedKubeConfig } from '../../support/env.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { createLock, createPod, getLease, lockBody, setPodStatus, type TestKube } from '../../support/fixtures.ts';

const kc = sharedKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const eventsAbout = async (namespace: string, name: string): Promise<CoreV1Event[]> =>
  (await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` })).items;

describe('the Event recorder on the real API server', () => {
  let namespace = '';
  beforeAll(async () => {
    namespace = await freshNamespace(kc, 'events-');
  });
  const target = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', namespace, name, uid: `uid-${name}` });

  it('records the same Event emitted 5 times as one Event with count 5 and a later lastTimestamp', async () => {
    const clock = new FakeClock({ wall: new Date('2026-01-01T10:00:00Z') });
    const recorder = eventRecorder(kc, 'fencepost-test', 'host-0', silentLogger, undefined, { clock });
    for (let i = 0; i < 5; i++) {
      recorder.emit(
        target('same'),
        'Warning',
        'HolderExpired',
        'Pod a-0 stopped renewing for a full lease duration; lock revoked',
      );
      clock.advance(2000);
    }
    const [event] = await eventually(async () => {
      const items = await eventsAbout(namespace, 'same');
      expect(items.map((e) => e.count)).toEqual([5]);
      return items;
    });
    expect(event).toMatchObject({
      reason: 'HolderExpired',
      type: 'Warning',
      source: { component: 'fencepost-test', host: 'host-0' },
    });
    expect(new Date(event?.firstTimestamp ?? 0).toISOString()).toBe('2026-01-01T10:00:00.000Z');
    expect(new Date(event?.lastTimestamp ?? 0).toISOString()).toBe('2026-01-01T10:00:08.000Z');
  });

  it('drops a flood of one Event beyond the burst of 25: one Event, count 25', async () => {
    const clock = new FakeClock();
    const recorder = eventRecorder(kc, 'fencepost-test', 'host-0', silentLogger, undefined, { clock });
    for (let i = 0; i < 60; i++) {
      recorder.emit(target('flood'), 'Normal', 'LeaseGranted', 'Granted to pod a-0');
      clock.advance(100);
    }
    await eventually(async () => {
      expect((await eventsAbout(namespace, 'flood')).map((e) => e.count)).toEqual([25]);
    });
    await sleep(1000); // the 35 dropped Events were never queued; nothing more arrives
    expect((await eventsAbout(namespace, 'flood')).map((e) => e.count)).toEqual([25]);
  });

  it('combines a flood of similar Events after nine, and drops it beyond the burst too', async () => {
    const clock = new FakeClock();
    const recorder = eventRecorder(kc, 'fencepost-test', 'host-0', silentLogger, undefined, { clock });
    for (let i = 1; i <= 60; i++) {
      recorder.emit(target('similar'), 'Normal', 'LeaseGranted', `Granted with fencing token ${i}`);
      clock.advance(100);
    }
    const done = async (): Promise<CoreV1Event[]> => {
      const items = await eventsAbout(namespace, 'similar');
      expect(items.reduce((n, e) => n + (e.count ?? 0), 0)).toBe(25);
      return items;
    };
    await eventually(done);
    await sleep(1000);
    const items = await done();
    expect(items).toHaveLength(10);
    const combined = items.filter((e) => e.message?.startsWith(COMBINED_PREFIX));
    expect(combined.map((e) => [e.count, e.message])).toEqual([
      [16, `${COMBINED_PREFIX}Granted with fencing token 25`],
    ]);
  });
});

describe("the controller's Events for the end of a term", () => {
  const fx = useLockController('events-ctrl-');
  let t: TestKube;
  beforeAll(() => {
    t = fx.t;
  });
  const reasons = async (lock: string): Promise<string[]> =>
    (await eventsAbout(t.namespace, lock)).map((e) => `${e.type ?? ''}/${e.reason ?? ''}`);
  const holderOf = async (lock: string) => {
    const l = await getLease(t, lock);
    return l !== undefined ? parseLease(l) : undefined;
  };

  it('reports a holder whose containers terminated as HolderTerminated, not HolderExpired', async () => {
    await createPod(t, 'term-0', { app: 'term' });
    await createPod(t, 'term-1', { app: 'term' });
    await createLock(t, lockBody('term', 'term', { leaseDurationSeconds: 30 }));
    const first = await eventually(async () => {
      const r = await holderOf('term');
      expect(r?.holder).toBeDefined();
      return r;
    });
    await setPodStatus(t, first?.holder?.name ?? '', 'terminated');
    await eventually(async () => {
      expect(await reasons('term')).toContain('Warning/HolderTerminated');
    });
    const ended = (await eventsAbout(t.namespace, 'term')).find((e) => e.reason === 'HolderTerminated');
    expect(ended?.message).toBe(`Pod ${first?.holder?.name ?? ''}'s containers terminated; lock handed over`);
    expect(await reasons('term')).not.toContain('Warning/HolderExpired');
  });

  it('reports a holder that stopped renewing as HolderExpired', async () => {
    await createPod(t, 'exp-0', { app: 'exp' });
    await createPod(t, 'exp-1', { app: 'exp' });
    await createLock(t, lockBody('exp', 'exp')); // 2 s lease, and nobody renews
    await eventually(async () => {
      expect(await reasons('exp')).toContain('Warning/HolderExpired');
    }, 30_000);
    expect(await reasons('exp')).not.toContain('Warning/HolderTerminated');
  });
});
