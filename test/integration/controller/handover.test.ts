import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LockSnapshot } from '../../../src/agent/session.ts';
import { parseLease } from '../../../src/lease/record.ts';
import {
  HANDOVER_REQUEST_ANNOTATION,
  HANDOVER_RESULT_ANNOTATION,
  parseHandoverResult,
  type HandoverResult,
} from '../../../src/protocol/handover.ts';
import { startAgent, type AgentProcess } from '../../support/agent-processes.ts';
import { eventually, sharedKubeconfigPath } from '../../support/env.ts';
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
    const req = request({ host: '127.0.0.1', port, method: 'POST', path }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
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
  let dir: string;
  const agents: AgentProcess[] = [];
  beforeAll(() => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-handover-'));
  });
  afterAll(async () => {
    await Promise.all(agents.map((a) => a.process.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  const agentFor = async (lock: string, pod: string, uid: string): Promise<AgentProcess> => {
    const a = await startAgent({
      lock,
      pod,
      uid,
      namespace: t.namespace,
      kubeconfig: sharedKubeconfigPath(),
      logDir: dir,
    });
    agents.push(a);
    return a;
  };
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
});
