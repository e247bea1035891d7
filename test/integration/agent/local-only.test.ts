import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLockController, type LockController } from '../../../src/controllers/distributedlock/setup.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { podKeys } from '../../../src/protocol/names.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import { agentBinary } from '../../support/agent-binary.ts';
import {
  eventually,
  freshNamespace,
  sharedKubeConfig,
  sharedKubeconfigPath,
  sharedRedisUrl,
} from '../../support/env.ts';
import { createLock, createPod, lockBody, testKube, type TestKube } from '../../support/fixtures.ts';
import { freePort } from '../../support/testbed/ports.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';
import { problemType, sendRaw as send } from '../../support/local-api.ts';

// The agent's local API seen from a web browser: a hostile page on a site whose name it rebinds to
// 127.0.0.1 (foreign Host), a cross-site page (Origin, Sec-Fetch-Site), and the requests a page
// can send without a CORS preflight (form posts, text/plain, no body). Against a real agent
// process whose pod a real controller grants a Mutex lock: every such request is refused before it
// changes anything, and the same requests from a program (loopback Host, JSON body) pass.
describe('the agent local API refuses cross-site and DNS-rebinding requests', () => {
  const kc = sharedKubeConfig();
  let t: TestKube;
  let dir = '';
  let controller: LockController;
  let agent: ManagedProcess | undefined;
  let port = 0;
  const local = (): Record<string, string> => ({ host: `127.0.0.1:${port}` });
  const json = (): Record<string, string> => ({ ...local(), 'content-type': 'application/json' });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-local-only-'));
    t = testKube(kc, await freshNamespace(kc, 'local-only-'));
    controller = await startLockController({
      kc,
      redisUrl: sharedRedisUrl(),
      namespace: t.namespace,
      identity: 'test-controller',
      clock: realClock,
      log: silentLogger,
    });
    await createLock(t, lockBody('lo', 'lo', { leaseDurationSeconds: 5, mode: 'Mutex' }));
    const pod = await createPod(t, 'lo-0', { app: 'lo' });
    port = await freePort();
    agent = spawnManaged('agent-local-only', agentBinary(), {
      args: [
        'agent',
        '--lock',
        'lo',
        '--listen',
        `127.0.0.1:${port}`,
        '--health-probe-bind-address=0',
        '--metrics-bind-address=0',
        '--kubeconfig',
        sharedKubeconfigPath(),
      ],
      logFile: join(dir, 'agent.log'),
      env: { ...process.env, POD_NAME: 'lo-0', POD_NAMESPACE: t.namespace, POD_UID: pod.metadata?.uid ?? '' },
    });
    await eventually(async () => {
      expect((await send(port, 'GET', '/readyz', local())).status).toBe(200);
    }, 30_000);
  }, 60_000);
  afterAll(async () => {
    await agent?.stop();
    await controller?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** requested: whether the agent has put this pod's Mutex request on it. */
  const requested = async (): Promise<boolean> => {
    const pod = await t.core.readNamespacedPod({ name: 'lo-0', namespace: t.namespace });
    return pod.metadata?.annotations?.[podKeys('lo').request] !== undefined;
  };

  it('refuses a foreign Host (DNS rebinding), for reads of lock state and the event stream too', async () => {
    const evil = { host: `evil.example:${port}` };
    for (const [method, path, headers, body] of [
      ['GET', '/v1/locks/lo', evil, undefined],
      ['GET', '/v1/locks/lo/events', evil, undefined],
      ['GET', '/openapi.json', { host: 'evil.example' }, undefined],
      ['GET', '/v1/locks/lo', { host: `127.0.0.1.evil.example:${port}` }, undefined],
      ['POST', '/v1/locks/lo/acquire', { ...evil, 'content-type': 'application/json' }, '{}'],
      ['POST', '/v1/locks/lo/release', { ...evil, 'content-type': 'application/json' }, '{}'],
    ] as const) {
      const a = await send(port, method, path, headers, body);
      expect(a.status, `${method} ${path} Host ${headers.host}: ${a.body}`).toBe(403);
      expect(problemType(a)).toBe('https://fencepost.io/problems/foreign-host');
      expect(JSON.parse(a.body)).toMatchObject({ rule: 'host' });
    }
    expect(await requested()).toBe(false);
  });

  it('refuses requests that carry a browser Origin or a cross-site Sec-Fetch-Site', async () => {
    for (const [method, path, extra] of [
      ['GET', '/v1/locks/lo', { origin: 'http://evil.example' }],
      ['GET', '/v1/locks/lo/events', { origin: 'null' }],
      ['POST', '/v1/locks/lo/acquire?wait=1s', { origin: `http://localhost:${port}` }],
      ['GET', '/v1/locks/lo', { 'sec-fetch-site': 'cross-site' }],
      ['POST', '/v1/locks/lo/acquire?wait=1s', { 'sec-fetch-site': 'same-site' }],
    ] as const) {
      const a = await send(port, method, path, { ...json(), ...extra }, method === 'POST' ? '{}' : undefined);
      expect(a.status, `${method} ${path} ${JSON.stringify(extra)}: ${a.body}`).toBe(403);
      expect(problemType(a)).toBe('https://fencepost.io/problems/browser-request');
    }
    expect(await requested()).toBe(false);
  });

  it('refuses POSTs a page can send without a preflight: no body, form, multipart, text/plain', async () => {
    for (const [what, headers, body] of [
      ['no body, no type', local(), undefined],
      ['a form post', { ...local(), 'content-type': 'application/x-www-form-urlencoded' }, 'wait=10s'],
      ['a multipart form', { ...local(), 'content-type': 'multipart/form-data; boundary=x' }, '--x--\r\n'],
      ['text/plain JSON', { ...local(), 'content-type': 'text/plain' }, '{}'],
      ['JSON type, no body', json(), undefined],
      ['JSON type, a body that is not JSON', json(), 'wait=10s'],
      ['JSON type, an array', json(), '[]'],
    ] as const) {
      for (const path of ['/v1/locks/lo/acquire?wait=1s', '/v1/locks/lo/release', '/v1/locks/lo/drained']) {
        const a = await send(port, 'POST', path, headers, body);
        expect(a.status, `${what} to ${path}: ${a.body}`).toBe(415);
        expect(problemType(a)).toBe('https://fencepost.io/problems/json-body-required');
      }
    }
    const member = await send(port, 'POST', '/v1/locks/lo/acquire', json(), '{"wait":"10s"}');
    expect(member.status).toBe(400);
    expect(JSON.parse(member.body)).toMatchObject({ parameter: 'wait' });
    expect(await requested()).toBe(false);
  });

  it('serves programs: loopback names, a typed address, and JSON POSTs (positive controls)', async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'localhost', `[::1]:${port}`, `127.0.0.2:${port}`]) {
      const a = await send(port, 'GET', '/v1/locks/lo', { host });
      expect(a.status, `Host ${host}: ${a.body}`).toBe(200);
    }
    expect((await send(port, 'GET', '/v1/locks/lo', { ...local(), 'sec-fetch-site': 'none' })).status).toBe(200);
    const held = await send(port, 'POST', '/v1/locks/lo/acquire?wait=30s', json(), '{}');
    expect(held.status, held.body).toBe(200);
    expect(JSON.parse(held.body)).toMatchObject({ held: true });
    const released = await send(
      port,
      'POST',
      '/v1/locks/lo/release',
      { ...local(), 'content-type': 'application/json; charset=utf-8' },
      '{ }',
    );
    expect(released.status, released.body).toBe(200);
    await eventually(async () => {
      expect(await requested()).toBe(false);
    });
  });
});
