/**
 * The agent's `POST /v1/locks/NAME/acquire?ifHeld=fail` (for a job image without fencepost in it:
 * the sidecar answers what `fencepost exec --if-held` decides), against a real agent process, the
 * real API server and a real controller: 423 `held` at once when another pod holds the lock, with
 * no request made; 423 `held` after withdrawing the request when the lock is granted to another pod
 * while this one waits; 423 `not-granted` with the request withdrawn; 400 for a bad ifHeld. Each
 * problem body validates against the agent's OpenAPI document.
 */
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { resolve } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquire } from '../../../src/index.ts';
import { startLockController, type LockController } from '../../../src/controllers/distributedlock/setup.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { podKeys } from '../../../src/protocol/names.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import { agentFleet, type AgentFleet } from '../../support/agent-processes.ts';
import { eventually, freshNamespace, sharedKubeConfig, sharedRedisUrl } from '../../support/env.ts';
import { createLock, createPod, lockBody, testKube, type TestKube } from '../../support/fixtures.ts';

const doc = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../../src/agent/openapi.json'), 'utf8')) as {
  components: unknown;
};
const ajv = new Ajv2020({ strict: true, allErrors: true, validateFormats: false });
ajv.addKeyword('components');
ajv.addSchema({ $id: 'agent-api.json', components: doc.components }, 'agent-api.json');

/** expectSchema validates a body against one of the document's schemas. */
const expectSchema = (name: string, body: unknown): void => {
  const v = ajv.compile({ $ref: `agent-api.json#/components/schemas/${name}` });
  expect(v(body), `${name}: ${ajv.errorsText(v.errors)}\n${JSON.stringify(body)}`).toBe(true);
};

/** post sends POST path to the agent and reads the answer (the timeout only catches hangs). */
const post = (port: number, path: string): Promise<{ status: number; body: Record<string, unknown> }> =>
  new Promise((done, fail) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path,
        headers: { 'content-type': 'application/json' },
        timeout: 90_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => {
          done({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> });
        });
      },
    );
    req.on('error', fail);
    req.end('{}');
  });

const requestOf = async (t: TestKube, pod: string, lock: string): Promise<string | undefined> =>
  (await t.core.readNamespacedPod({ name: pod, namespace: t.namespace })).metadata?.annotations?.[
    podKeys(lock).request
  ];

describe('the agent API: acquire with ifHeld=fail', () => {
  const kc = sharedKubeConfig();
  let t: TestKube;
  let fleet: AgentFleet;
  let controller: LockController | undefined;
  beforeAll(async () => {
    // No controller yet: the second test needs the lock free while requests wait.
    t = testKube(kc, await freshNamespace(kc, 'agent-if-held-'));
    fleet = agentFleet(t.namespace, 'if-held');
  });
  afterAll(async () => {
    await fleet.stopAll();
    await controller?.stop();
  });

  const agentFor = (pod: string, uid: string, lock: string) => fleet.start(lock, pod, uid);
  const startController = (): Promise<LockController> =>
    startLockController({
      kc,
      redisUrl: sharedRedisUrl(),
      namespace: t.namespace,
      identity: 'if-held-controller',
      clock: realClock,
      log: silentLogger,
    });

  it('withdraws its request and answers 423 not-granted when nobody is granted in time; 400 for a bad ifHeld', async () => {
    const p = await createPod(t, 'free-0', { app: 'free' });
    await createLock(t, lockBody('free', 'free', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    const agent = await agentFor('free-0', p.metadata?.uid ?? '', 'free');
    const bad = await post(agent.port, '/v1/locks/free/acquire?ifHeld=skip');
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ type: 'https://fencepost.io/problems/invalid-parameter', parameter: 'ifHeld' });
    expectSchema('InvalidParameterProblem', bad.body);
    const r = await post(agent.port, '/v1/locks/free/acquire?wait=500ms&ifHeld=fail');
    expect(r.status).toBe(423);
    expect(r.body).toMatchObject({ type: 'https://fencepost.io/problems/not-granted', lock: 'free' });
    expect(r.body.detail).toContain('the request was withdrawn (ifHeld=fail)');
    expectSchema('NotGrantedProblem', r.body);
    expect(await requestOf(t, 'free-0', 'free')).toBeUndefined();
  });

  it('answers 423 held after withdrawing its request when the lock is granted to another pod while it waits', async () => {
    const a = await createPod(t, 'race-a', { app: 'race' });
    const b = await createPod(t, 'race-b', { app: 'race' });
    await createLock(t, lockBody('race', 'race', { mode: 'Mutex', leaseDurationSeconds: 30 }));
    const agent = await agentFor('race-b', b.metadata?.uid ?? '', 'race');
    const first = acquire('race', {
      kubeconfig: kc,
      namespace: t.namespace,
      pod: { name: 'race-a', uid: a.metadata?.uid ?? '' },
      waitMs: 60_000,
    });
    await eventually(async () => {
      expect(await requestOf(t, 'race-a', 'race')).toBeDefined();
    });
    const answer = post(agent.port, '/v1/locks/race/acquire?wait=60s&ifHeld=fail');
    await eventually(async () => {
      expect(await requestOf(t, 'race-b', 'race')).toBeDefined(); // free when asked: it requested
    }, 30_000);
    controller = await startController();
    const r = await answer;
    expect(r.status).toBe(423);
    expect(r.body).toMatchObject({ type: 'https://fencepost.io/problems/held', lock: 'race', holder: 'race-a' });
    expectSchema('HeldProblem', r.body);
    expect(await requestOf(t, 'race-b', 'race')).toBeUndefined();
    await using _held = await first;
    // Held when asked: 423 held at once, and nothing requested.
    const again = await post(agent.port, '/v1/locks/race/acquire?wait=60s&ifHeld=fail');
    expect(again.status).toBe(423);
    expect(again.body).toMatchObject({ type: 'https://fencepost.io/problems/held', holder: 'race-a' });
    expect(await requestOf(t, 'race-b', 'race')).toBeUndefined();
  }, 120_000);

  it('answers 423 held at once for a Semaphore whose every permit another pod holds, and not while a permit is free', async () => {
    controller ??= await startController();
    const pods = await Promise.all(['sem-a', 'sem-b', 'sem-c'].map((n) => createPod(t, n, { app: 'sem' })));
    await createLock(t, lockBody('sem', 'sem', { mode: 'Semaphore', permits: 2, leaseDurationSeconds: 30 }));
    const take = (i: number) =>
      acquire('sem', {
        kubeconfig: kc,
        namespace: t.namespace,
        pod: { name: pods[i]?.metadata?.name ?? '', uid: pods[i]?.metadata?.uid ?? '' },
        waitMs: 60_000,
      });
    await using _a = await take(0);
    const agent = await agentFor('sem-c', pods[2]?.metadata?.uid ?? '', 'sem');
    {
      // One permit free: not held; granted.
      const r = await post(agent.port, '/v1/locks/sem/acquire?wait=30s&ifHeld=fail');
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const rel = await post(agent.port, '/v1/locks/sem/release');
      expect(rel.status).toBe(200);
    }
    await using _b = await take(1);
    const r = await post(agent.port, '/v1/locks/sem/acquire?wait=30s&ifHeld=fail');
    expect(r.status).toBe(423);
    expect(r.body).toMatchObject({ type: 'https://fencepost.io/problems/held', lock: 'sem' });
    expect(['sem-a', 'sem-b']).toContain(r.body.holder);
    expectSchema('HeldProblem', r.body);
    expect(String(r.body.detail)).toContain('every one of its 2 permits');
    // sem-a gives its permit back: one is free again, whichever permit Lease the agent saw last.
    await _a.release();
    const again = await post(agent.port, '/v1/locks/sem/acquire?wait=30s&ifHeld=fail');
    expect(again.status, JSON.stringify(again.body)).toBe(200);
  }, 120_000);
});
