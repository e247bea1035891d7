import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManagedProcess } from '../../support/testbed/processes.ts';
import { firstEvent, startAgent } from '../../support/agent-processes.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { eventually, sharedKubeconfigPath } from '../../support/env.ts';
import { createLock, createPod, lockBody, type TestKube } from '../../support/fixtures.ts';
import { leaseName } from '../../../src/protocol/names.ts';

// A co-tenant shortens a held lock's lease (the agent's part): anyone who may update a Lease can
// shorten the leaseDurationSeconds of a held lock's Lease. The controller then expires the holder
// after the short duration, while an agent that kept its term's renew deadline (2 s here, on the
// Lease's annotation) would trust it longer than that. The agent must take the shorter reading: a
// renew deadline no shorter than the lease duration contradicts it, and the holder steps down at
// once, saying why.
describe('a held Lease whose timings are made to contradict each other', () => {
  const fx = useLockController('timings-');
  let t: TestKube;
  let dir: string;
  const procs: ManagedProcess[] = [];
  beforeAll(() => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-timings-'));
  });
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('steps the holder down when its leaseDurationSeconds is shortened to the renew deadline or below', async () => {
    const a = await createPod(t, 'timed-a', { app: 'timed' });
    const agent = await startAgent({
      lock: 'timed',
      pod: 'timed-a',
      uid: a.metadata?.uid ?? '',
      namespace: t.namespace,
      kubeconfig: sharedKubeconfigPath(),
      logDir: dir,
    });
    procs.push(agent.process);
    await createLock(t, lockBody('timed', 'timed', { leaseDurationSeconds: 3 })); // renew deadline 2 s, period 1 s
    await eventually(async () => {
      expect((await agent.snapshot()).held).toBe(true);
    }, 20_000);
    const token = (await agent.snapshot()).token;

    // A co-tenant with `leases update` (as the controller never would): 3 s → 1 s, the annotations kept.
    const lost = firstEvent(agent.port, 'timed', 'lost');
    let writtenAt = 0;
    await eventually(async () => {
      const lease = await t.leases.readNamespacedLease({ name: leaseName('timed'), namespace: t.namespace });
      lease.spec = { ...lease.spec, leaseDurationSeconds: 1 };
      await t.leases.replaceNamespacedLease({ name: leaseName('timed'), namespace: t.namespace, body: lease });
      writtenAt = performance.now();
    }, 10_000);
    // The short reading: 1 s from the last renewal at most. The holder must have stopped believing by then.
    // (The step-down hands the term back; the controller may then grant the agent a new term, with a
    // new token and timings of its own: only the tampered term's token counts.)
    const beliefs: { at: number; held: boolean }[] = [];
    while (performance.now() < writtenAt + 2500) {
      const s = await agent.snapshot();
      beliefs.push({ at: performance.now() - writtenAt, held: s.held && s.token === token });
      await new Promise((r) => setTimeout(r, 100));
    }
    lost.stop();
    const lastHeld = beliefs.filter((b) => b.held).at(-1)?.at;
    process.stdout.write(
      `contradictory timings: the holder last said held its term ${lastHeld === undefined ? 'never' : `${Math.round(lastHeld)} ms`} after the Lease was shortened to 1 s (renew deadline 2 s)\n`,
    );
    expect(lastHeld ?? 0).toBeLessThan(1000);
    await eventually(async () => {
      const events = await t.core.listNamespacedEvent({
        namespace: t.namespace,
        fieldSelector: 'involvedObject.name=timed-a,reason=LockLost',
      });
      expect(events.items.map((e) => e.message ?? '')).toEqual([
        `Stepped down from lock timed (fencing token ${token ?? ''}): term timings contradict each other: renew deadline 2000 ms is not below the lease duration 1000 ms`,
      ]);
    }, 20_000);
  });
});
