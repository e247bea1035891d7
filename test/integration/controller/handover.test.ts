import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LockSnapshot } from '../../../src/agent/session.ts';
import { parseLease } from '../../../src/lease/record.ts';
import {
  HANDOVER_REQUEST_ANNOTATION,
  HANDOVER_RESULT_ANNOTATION,
  parseHandoverResult,
  type HandoverResult,
} from '../../../src/protocol/handover.ts';
import { agentFleet, type AgentFleet } from '../../support/agent-processes.ts';
import { eventually } from '../../support/env.ts';
import {
  askHandover,
  createLock,
  createPod,
  getLease,
  getLock,
  keepRenewing,
  lockBody,
  setPodStatus,
  type TestKube,
} from '../../support/fixtures.ts';
import { useLockController } from '../../support/lock-controller.ts';

/** post sends a POST to an agent's local API and resolves with the status and body. */
function post(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, method: 'POST', path, headers: { 'content-type': 'application/json' } },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end('{}');
  });
}

/** sse collects an agent's SSE event names for a lock. */
function sse(port: number, lock: string): { names: string[]; stop: () => void } {
  const names: string[] = [];
  const req = request(`http://127.0.0.1:${port}/v1/locks/${lock}/events`, (res) => {
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      for (const m of chunk.matchAll(/^event: (\w+)$/gm)) if (m[1] !== undefined) names.push(m[1]);
    });
  });
  req.on('error', () => undefined);
  req.end();
  return { names, stop: () => req.destroy() };
}

// Planned handover against the real API server, with the controller in-process and the pods'
// agents as real processes (the shipped agent binary): the holder's agent drains, releases with
// and the controller grants the chosen pod with a larger token.
describe('planned handover (fencepost.io/handover on the lock)', () => {
  const fx = useLockController('handover-');
  let t: TestKube;
  let fleet: AgentFleet;
  beforeAll(() => {
    t = fx.t;
    fleet = agentFleet(t.namespace, 'handover');
  });
  afterAll(() => fleet.stopAll());

  const agentFor = (lock: string, pod: string, uid: string) => fleet.start(lock, pod, uid);
  const holderOf = async (lock: string) => {
    const lease = await getLease(t, lock);
    return lease !== undefined ? parseLease(lease) : undefined;
  };
  const ask = (lock: string, to: string, token: bigint, drainSeconds?: number): Promise<void> =>
    askHandover(t, lock, to, token, { drainSeconds, by: 'handover.test.ts' });
  const resultOf = async (lock: string): Promise<HandoverResult> =>
    eventually(async () => {
      const l = await getLock(t, lock);
      expect(l.metadata.annotations?.[HANDOVER_REQUEST_ANNOTATION]).toBeUndefined();
      const r = parseHandoverResult(l.metadata.annotations?.[HANDOVER_RESULT_ANNOTATION]);
      expect(r).toBeDefined();
      return r as HandoverResult;
    }, 30_000);
  const eventsOf = async (lock: string) =>
    (await t.core.listNamespacedEvent({ namespace: t.namespace })).items.filter((e) => e.involvedObject.name === lock);

  it('the holder drains (SSE draining, snapshot.draining), the app answers early, and the chosen pod is granted with a larger token', async () => {
    const p0 = await createPod(t, 'h-0', { app: 'h' });
    const p1 = await createPod(t, 'h-1', { app: 'h' });
    await createPod(t, 'h-2', { app: 'h' }); // a candidate that comes before h-1 in no order here, but is not chosen
    const a0 = await agentFor('h', 'h-0', p0.metadata?.uid ?? '');
    const a1 = await agentFor('h', 'h-1', p1.metadata?.uid ?? '');
    await createLock(t, lockBody('h', 'h', { leaseDurationSeconds: 6 }));
    const first = await eventually(async () => {
      const s = await a0.snapshot();
      expect(s.held).toBe(true);
      return BigInt(s.token ?? '0');
    });
    const stream = sse(a0.port, 'h');
    let next: bigint;
    try {
      await ask('h', 'h-1', first, 60);
      const draining = await eventually(async () => {
        const s: LockSnapshot = await a0.snapshot();
        expect(s.draining?.to).toBe('h-1');
        return s;
      });
      expect(draining.held).toBe(true); // still held while it drains
      expect(draining.draining?.deadlineInMs).toBeGreaterThan(50_000);
      await eventually(() => expect(stream.names).toContain('draining'));
      const answered = await post(a0.port, '/v1/locks/h/drained');
      expect(answered.status).toBe(200);
      expect((JSON.parse(answered.body) as LockSnapshot).held).toBe(false);
      next = await eventually(async () => {
        const s = await a1.snapshot();
        expect(s.held).toBe(true);
        return BigInt(s.token ?? '0');
      });
      expect(next).toBeGreaterThan(first);
      expect((await holderOf('h'))?.holder?.name).toBe('h-1');
      const r = await resultOf('h');
      expect(r).toMatchObject({ outcome: 'Completed', to: 'h-1', token: first.toString(), newToken: next.toString() });
      await eventually(async () => {
        const reasons = (await eventsOf('h')).map((e) => e.reason);
        expect(reasons).toContain('HandoverStarted');
        expect(reasons).toContain('HandoverCompleted');
      });
      const granted = (await eventsOf('h')).find((e) => e.reason === 'LeaseGranted' && e.message?.includes('h-1'));
      expect(granted?.message).toContain('handed it over');
      expect(stream.names).toContain('released');
      // A second answer is refused: no handover is under way any more.
      expect((await post(a0.port, '/v1/locks/h/drained')).status).toBe(409);
    } finally {
      stream.stop();
    }

    // Back to h-0 without an answer from the app: the drain period (1 s) runs out.
    await ask('h', 'h-0', next, 1);
    const back = await eventually(async () => {
      const s = await a0.snapshot();
      expect(s.held).toBe(true);
      return BigInt(s.token ?? '0');
    }, 30_000);
    expect(back).toBeGreaterThan(next);
    expect(await resultOf('h')).toMatchObject({ outcome: 'Completed', to: 'h-0' });

    // Refused, naming why: a stale token (the lock moved on), a target not Ready.
    await ask('h', 'h-1', first);
    const stale = await resultOf('h');
    expect(stale).toMatchObject({ outcome: 'Refused', to: 'h-1' });
    expect(stale.message).toContain('token moved on');
    await setPodStatus(t, 'h-2', 'unready');
    await ask('h', 'h-2', back);
    const unready = await resultOf('h');
    expect(unready).toMatchObject({ outcome: 'Refused', to: 'h-2' });
    expect(unready.message).toContain('not Ready');
    expect((await holderOf('h'))?.holder?.name).toBe('h-0'); // nothing moved
    await eventually(async () => expect((await eventsOf('h')).map((e) => e.reason)).toContain('HandoverRefused'));
  }, 120_000);

  it('a holder that does not release (no agent) keeps the lock: the handover lapses after drain + one lease duration, nothing revoked', async () => {
    await createPod(t, 'x-0', { app: 'x' });
    await createPod(t, 'x-1', { app: 'x' });
    await createLock(t, lockBody('x', 'x', { leaseDurationSeconds: 3 }));
    const rec = await eventually(async () => {
      const r = await holderOf('x');
      expect(r?.holder?.name).toBe('x-0');
      return r;
    });
    const stop = keepRenewing(t, 'x', 500); // a holder that renews but knows nothing of handovers
    try {
      await ask('x', 'x-1', rec?.token ?? 0n, 1);
      await eventually(async () => expect((await holderOf('x'))?.handover?.to.name).toBe('x-1'));
      const r = await resultOf('x');
      expect(r.outcome).toBe('TimedOut');
      const after = await holderOf('x');
      expect(after?.holder?.name).toBe('x-0');
      expect(after?.token).toBe(rec?.token);
      // The answer first, then (the request gone) the mark is taken back.
      await eventually(async () => expect((await holderOf('x'))?.handover).toBeUndefined());
      expect((await holderOf('x'))?.holder?.name).toBe('x-0');
      await eventually(async () => expect((await eventsOf('x')).map((e) => e.reason)).toContain('HandoverTimedOut'));
    } finally {
      await stop();
    }
  }, 60_000);

  /** setPreferredHolder writes the Lease's KEP-4355 fields as a coordinator would (the test's admin). */
  const setPreferredHolder = async (lock: string, value: string): Promise<void> => {
    const lease = await getLease(t, lock);
    if (lease?.metadata?.name === undefined) throw new Error(`the Lease of lock ${lock} is gone`);
    await t.leases.replaceNamespacedLease({
      name: lease.metadata.name,
      namespace: t.namespace,
      body: {
        ...lease,
        spec: { ...lease.spec, strategy: 'OldestEmulationVersion', preferredHolder: value },
      },
    });
  };

  it('Lease.spec.preferredHolder (KEP-4355) hands the lock over to the pod it names; a name that is no candidate moves nothing', async () => {
    const p0 = await createPod(t, 'k-0', { app: 'k' });
    const p1 = await createPod(t, 'k-1', { app: 'k' });
    const a0 = await agentFor('k', 'k-0', p0.metadata?.uid ?? '');
    const a1 = await agentFor('k', 'k-1', p1.metadata?.uid ?? '');
    await createLock(t, lockBody('k', 'k', { leaseDurationSeconds: 6, handover: { drainSeconds: 1 } }));
    const first = await eventually(async () => {
      const s = await a0.snapshot();
      expect(s.held).toBe(true);
      return BigInt(s.token ?? '0');
    });

    // The API server keeps the field (the testbed enables CoordinatedLeaderElection).
    await setPreferredHolder('k', `k-1/${p1.metadata?.uid ?? ''}`);
    expect((await getLease(t, 'k'))?.spec?.preferredHolder).toBe(`k-1/${p1.metadata?.uid ?? ''}`);
    const next = await eventually(async () => {
      const s = await a1.snapshot();
      expect(s.held).toBe(true);
      return BigInt(s.token ?? '0');
    }, 30_000);
    expect(next).toBeGreaterThan(first);
    expect((await a0.snapshot()).held).toBe(false);
    await eventually(async () => {
      const started = (await eventsOf('k')).find((e) => e.reason === 'HandoverStarted');
      expect(started?.message).toContain("because the Lease's spec.preferredHolder names pod k-1");
    });

    // Satisfied, it stands: the holder is the pod it names, so nothing moves. A value that names
    // no candidate (a pod that does not exist) is ignored: no mark, same holder, same token.
    await setPreferredHolder('k', 'k-nobody');
    await new Promise((r) => setTimeout(r, 3000));
    const after = await holderOf('k');
    expect(after?.holder?.name).toBe('k-1');
    expect(after?.token).toBe(next);
    expect(after?.handover).toBeUndefined();
    expect((await a1.snapshot()).held).toBe(true);
  }, 90_000);
});
