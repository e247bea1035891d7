import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLockController, type LockController } from '../../../src/controllers/distributedlock/setup.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import { freePort } from '../../support/testbed/ports.ts';
import { spawnManaged, type ManagedProcess } from '../../support/testbed/processes.ts';
import {
  eventually,
  freshNamespace,
  sharedKubeConfig,
  sharedKubeconfigPath,
  sharedRedisUrl,
} from '../../support/env.ts';
import { createLock, createPod, getLease, getLock, lockBody, testKube, type TestKube } from '../../support/fixtures.ts';
import { leaseName } from '../../../src/protocol/names.ts';
import { handoverMarkedLease, parseLease } from '../../../src/lease/record.ts';
import { agentBinary } from '../../support/agent-binary.ts';

const DOC_FILE = resolve(import.meta.dirname, '../../../src/agent/openapi.json');

interface Doc {
  readonly openapi: string;
  readonly paths: Record<string, Record<string, { responses?: Record<string, Response | { $ref: string }> }>>;
  readonly components: { readonly responses: Record<string, Response> };
}
interface Response {
  readonly content?: Record<string, { schema: unknown }>;
}
interface Answer {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
}

/** call sends one request and reads the whole answer (headers: e.g. Last-Event-ID). */
function call(port: number, method: string, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((done, fail) => {
    // Every POST as the API requires it (Content-Type: application/json, the body {}).
    const json = method === 'POST' ? { 'content-type': 'application/json', ...headers } : headers;
    const req = request({ host: '127.0.0.1', port, method, path, headers: json, timeout: 20_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
      });
      res.on('end', () => {
        done({ status: res.statusCode ?? 0, contentType: res.headers['content-type'] ?? '', body });
      });
    });
    req.on('error', fail);
    req.end(method === 'POST' ? '{}' : undefined);
  });
}

/** openStream reads an SSE stream into text until stop(); returns the status and content type with it. */
function openStream(
  port: number,
  path: string,
  headers: Record<string, string> = {},
): { text: () => string; answer: Promise<Omit<Answer, 'body'>>; stop: () => void } {
  let text = '';
  let req: ReturnType<typeof request> | undefined;
  const answer = new Promise<Omit<Answer, 'body'>>((done, fail) => {
    req = request({ host: '127.0.0.1', port, method: 'GET', path, headers }, (res) => {
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
      });
      done({ status: res.statusCode ?? 0, contentType: res.headers['content-type'] ?? '' });
    });
    req.on('error', fail);
    req.end();
  });
  return {
    text: () => text,
    answer,
    stop: () => {
      req?.destroy();
    },
  };
}

/** frames parses SSE text into its events (comment lines and the retry line left out). */
function frames(text: string): { id: string | undefined; event: string; data: unknown }[] {
  return text
    .split('\n\n')
    .filter((block) => /^(id|event|data):/m.test(block))
    .map((block) => {
      const field = (name: string): string | undefined => new RegExp(`^${name}: (.*)$`, 'm').exec(block)?.[1];
      return {
        id: field('id'),
        event: field('event') ?? 'message',
        data: JSON.parse(field('data') ?? 'null') as unknown,
      };
    });
}

// The agent's HTTP API as a contract: src/agent/openapi.json, served at /openapi.json, against the
// answers of real agent processes. Every documented path, method and status is produced by a real
// request; each answer's status and content type must be documented for that path and method, and
// its body must validate against the documented schema. One agent is synced (a controller grants
// it a Mutex lock); the other cannot reach its API server, so it is never ready and its writes fail.
describe('the agent HTTP API against its OpenAPI document', () => {
  const kc = sharedKubeConfig();
  let t: TestKube;
  let dir = '';
  let controller: LockController;
  let controllerStopped = false;
  const procs: ManagedProcess[] = [];
  let ready = 0; // the synced agent's API port
  let cut = 0; // the agent without an API server
  const doc = JSON.parse(readFileSync(DOC_FILE, 'utf8')) as Doc;
  const ajv = new Ajv2020({ strict: true, allErrors: true, validateFormats: false });
  ajv.addKeyword('components');
  ajv.addSchema({ $id: 'agent-api.json', components: doc.components }, 'agent-api.json');
  const seen: { path: string; method: string; status: number }[] = [];

  /** check asserts an answer is documented for (path template, method) and validates; returns the parsed body. */
  const check = (path: string, method: string, a: Omit<Answer, 'body'> & { body?: string }): unknown => {
    seen.push({ path, method, status: a.status });
    const op = doc.paths[path]?.[method.toLowerCase()];
    expect(op, `${method} ${path} is documented`).toBeDefined();
    const documented = op?.responses?.[String(a.status)];
    expect(documented, `${method} ${path} → ${a.status} is documented (body: ${a.body ?? ''})`).toBeDefined();
    const response =
      documented !== undefined && '$ref' in documented
        ? doc.components.responses[documented.$ref.replace('#/components/responses/', '')]
        : documented;
    const mediaType = a.contentType.split(';')[0]?.trim() ?? '';
    const media = response?.content?.[mediaType];
    expect(
      media,
      `${method} ${path} → ${a.status} is documented as ${mediaType}; documented: ${Object.keys(response?.content ?? {}).join(', ')}`,
    ).toBeDefined();
    if (a.body === undefined || mediaType === 'text/event-stream') return undefined;
    const body: unknown = mediaType.endsWith('json') ? JSON.parse(a.body) : a.body;
    const validate = compile(media?.schema);
    expect(validate(body), `${method} ${path} → ${a.status}: ${ajv.errorsText(validate.errors)}\n${a.body}`).toBe(true);
    return body;
  };
  const compile = (schema: unknown): ValidateFunction =>
    ajv.compile(
      JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"agent-api.json#/components/')) as object,
    );
  const validateAs = (name: string, value: unknown): void => {
    const v = compile({ $ref: `#/components/schemas/${name}` });
    expect(v(value), `${name}: ${ajv.errorsText(v.errors)}\n${JSON.stringify(value)}`).toBe(true);
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-contract-'));
    t = testKube(kc, await freshNamespace(kc, 'contract-'));
    controller = await startLockController({
      kc,
      redisUrl: sharedRedisUrl(),
      namespace: t.namespace,
      identity: 'test-controller',
      clock: realClock,
      log: silentLogger,
    });
    await createLock(t, lockBody('api', 'api', { leaseDurationSeconds: 3, mode: 'Mutex' }));
    const pod = await createPod(t, 'api-0', { app: 'api' });
    const nowhere = join(dir, 'nowhere.kubeconfig');
    writeFileSync(
      nowhere,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'x',
        clusters: [{ name: 'x', cluster: { server: `http://127.0.0.1:${await freePort()}` } }],
        users: [{ name: 'x', user: {} }],
        contexts: [{ name: 'x', context: { cluster: 'x', user: 'x' } }],
      }),
    );
    const start = async (name: string, kubeconfig: string, uid: string): Promise<number> => {
      const port = await freePort();
      procs.push(
        spawnManaged(name, agentBinary(), {
          // `busy` has no DistributedLock: nobody ever grants it.
          args: [
            'agent',
            '--lock',
            'api',
            '--lock',
            'busy',
            '--listen',
            `127.0.0.1:${port}`,
            '--health-probe-bind-address=0',
            '--metrics-bind-address=0',
            '--kubeconfig',
            kubeconfig,
          ],
          logFile: join(dir, `${name}.log`),
          env: { ...process.env, POD_NAME: 'api-0', POD_NAMESPACE: t.namespace, POD_UID: uid },
        }),
      );
      return port;
    };
    ready = await start('agent-synced', sharedKubeconfigPath(), pod.metadata?.uid ?? '');
    cut = await start('agent-cut-off', nowhere, 'no-such-pod');
    await eventually(async () => {
      expect((await call(ready, 'GET', '/readyz')).status).toBe(200);
    }, 30_000);
    await eventually(async () => {
      expect((await call(cut, 'GET', '/healthz')).status).toBe(200);
    }, 30_000);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    if (!controllerStopped) await controller?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves its OpenAPI 3.1 document, the file in the repository, whose schemas compile', async () => {
    const a = await call(ready, 'GET', '/openapi.json');
    expect(check('/openapi.json', 'GET', a)).toEqual(doc);
    expect(doc.openapi).toBe('3.1.0');
    for (const name of Object.keys((doc.components as unknown as { schemas: object }).schemas))
      compile({ $ref: `#/components/schemas/${name}` });
  });

  it('answers the probes, the lock and the errors as documented', async () => {
    check('/healthz', 'GET', await call(ready, 'GET', '/healthz'));
    check('/readyz', 'GET', await call(ready, 'GET', '/readyz'));
    expect(check('/readyz', 'GET', await call(cut, 'GET', '/readyz'))).toMatch(/not ready/);
    for (const path of ['/healthz', '/readyz', '/openapi.json']) {
      const a = await call(ready, 'POST', path);
      expect(a.status).toBe(405);
      check(path, 'GET', a); // a 405 is documented under the path's one method
    }
  });

  it('acquires (200), refuses a bad wait (400), answers an unknown lock (404) and a wrong method (405), and says 423 when not granted in time', async () => {
    const held = check(
      '/v1/locks/{name}/acquire',
      'POST',
      await call(ready, 'POST', '/v1/locks/api/acquire?wait=30s'),
    ) as { held: boolean; token: string };
    expect(held.held).toBe(true);
    expect(check('/v1/locks/{name}', 'GET', await call(ready, 'GET', '/v1/locks/api'))).toMatchObject({
      held: true,
      token: held.token,
    });
    expect(
      check('/v1/locks/{name}/acquire', 'POST', await call(ready, 'POST', '/v1/locks/api/acquire?wait=soon')),
    ).toMatchObject({ type: 'https://fencepost.io/problems/invalid-parameter', status: 400, parameter: 'wait' });
    for (const [path, method] of [
      ['/v1/locks/{name}', 'GET'],
      ['/v1/locks/{name}/events', 'GET'],
      ['/v1/locks/{name}/acquire', 'POST'],
      ['/v1/locks/{name}/complete', 'POST'],
      ['/v1/locks/{name}/drained', 'POST'],
      ['/v1/locks/{name}/release', 'POST'],
    ] as const) {
      const real = path.replace('{name}', 'nope');
      expect(check(path, method, await call(ready, method, real))).toMatchObject({
        type: 'https://fencepost.io/problems/unknown-lock',
        status: 404,
        locks: ['api', 'busy'],
      });
      const wrong = method === 'GET' ? 'POST' : 'GET';
      const a = await call(ready, wrong, path.replace('{name}', 'api'));
      expect(a.status).toBe(405);
      check(path, method, a); // a 405 is documented on the path's one method
    }
    const notGranted = check(
      '/v1/locks/{name}/acquire',
      'POST',
      await call(ready, 'POST', '/v1/locks/busy/acquire?wait=300ms'),
    );
    expect(notGranted).toMatchObject({
      type: 'https://fencepost.io/problems/not-granted',
      status: 423,
      lock: 'busy',
      snapshot: { lock: 'busy', held: false },
    });
    expect((await call(ready, 'GET', '/no/such/path')).contentType).toBe('application/problem+json');
  });

  it("reports a run completed only with the held term's token (200, else 409 not-held; 400 without runId or token), and then answers acquire of that run id 409 already-done", async () => {
    const held = check('/v1/locks/{name}', 'GET', await call(ready, 'GET', '/v1/locks/api')) as {
      held: boolean;
      token: string;
    };
    expect(held.held).toBe(true); // still held since the acquire test
    expect(
      check(
        '/v1/locks/{name}/complete',
        'POST',
        await call(ready, 'POST', `/v1/locks/api/complete?token=${held.token}`),
      ),
    ).toMatchObject({ status: 400, parameter: 'runId' });
    expect(
      check(
        '/v1/locks/{name}/complete',
        'POST',
        await call(ready, 'POST', '/v1/locks/api/complete?runId=slot-1&token=soon'),
      ),
    ).toMatchObject({ status: 400, parameter: 'token' });
    const other = (BigInt(held.token) + 1n).toString();
    expect(
      check(
        '/v1/locks/{name}/complete',
        'POST',
        await call(ready, 'POST', `/v1/locks/api/complete?runId=slot-1&token=${other}`),
      ),
    ).toMatchObject({
      type: 'https://fencepost.io/problems/not-held',
      status: 409,
      lock: 'api',
      snapshot: { held: true, token: held.token },
    });
    // `busy` was never granted: no term, whatever the token.
    expect(
      check(
        '/v1/locks/{name}/complete',
        'POST',
        await call(ready, 'POST', `/v1/locks/busy/complete?runId=slot-1&token=${held.token}`),
      ),
    ).toMatchObject({ type: 'https://fencepost.io/problems/not-held', snapshot: { held: false } });
    expect((await getLock(t, 'api')).status?.completedRuns ?? []).toEqual([]);
    expect(
      check(
        '/v1/locks/{name}/complete',
        'POST',
        await call(ready, 'POST', `/v1/locks/api/complete?runId=slot-1&token=${held.token}`),
      ),
    ).toMatchObject({ held: true, token: held.token });
    // The controller records the report in the lock's status; from then on the run id is refused.
    await eventually(async () => {
      expect((await getLock(t, 'api')).status?.completedRuns?.map((r) => r.runId)).toEqual(['slot-1']);
    }, 20_000);
    expect(
      check(
        '/v1/locks/{name}/acquire',
        'POST',
        await call(ready, 'POST', '/v1/locks/api/acquire?wait=5s&runId=slot-1'),
      ),
    ).toMatchObject({ type: 'https://fencepost.io/problems/already-done', status: 409, lock: 'api', runId: 'slot-1' });
    // Refused without touching the term this pod holds; another run id is granted (already held).
    expect(check('/v1/locks/{name}', 'GET', await call(ready, 'GET', '/v1/locks/api'))).toMatchObject({
      held: true,
      token: held.token,
    });
    expect(
      check(
        '/v1/locks/{name}/acquire',
        'POST',
        await call(ready, 'POST', '/v1/locks/api/acquire?wait=5s&runId=slot-2'),
      ),
    ).toMatchObject({ held: true, token: held.token });
  });

  it('answers 502 when the API server does not take the request or the release', async () => {
    expect(check('/v1/locks/{name}/acquire', 'POST', await call(cut, 'POST', '/v1/locks/api/acquire'))).toMatchObject({
      type: 'https://fencepost.io/problems/kubernetes-unavailable',
      status: 502,
      lock: 'api',
    });
    expect(check('/v1/locks/{name}/release', 'POST', await call(cut, 'POST', '/v1/locks/api/release'))).toMatchObject({
      status: 502,
    });
    // With a run id, the read of the lock's completed runs fails first.
    expect(
      check('/v1/locks/{name}/acquire', 'POST', await call(cut, 'POST', '/v1/locks/api/acquire?runId=slot-3')),
    ).toMatchObject({ status: 502, lock: 'api' });
  });

  it('streams events with retry: and id: lines whose data validate, replays what a client missed after Last-Event-ID, and releases (200)', async () => {
    const first = openStream(ready, '/v1/locks/api/events');
    check('/v1/locks/{name}/events', 'GET', await first.answer);
    await eventually(
      () => {
        expect(frames(first.text()).length).toBeGreaterThan(0);
      },
      5000,
      50,
    );
    expect(first.text()).toMatch(/^retry: 1000\n\n/);
    const [state] = frames(first.text());
    expect(state?.event).toBe('state');
    validateAs('LockSnapshot', state?.data);
    check('/v1/locks/{name}/release', 'POST', await call(ready, 'POST', '/v1/locks/api/release'));
    await eventually(
      () => {
        expect(frames(first.text()).map((f) => f.event)).toContain('released');
      },
      10_000,
      50,
    );
    first.stop();
    const seenFirst = frames(first.text());
    for (const f of seenFirst) {
      expect(f.id).toMatch(/^[0-9a-z]+-\d+$/);
      if (f.event !== 'state') validateAs('LockEvent', f.data);
    }
    // Reconnecting after the state event replays every event since, in order, then a fresh state.
    const again = openStream(ready, '/v1/locks/api/events', { 'last-event-id': state?.id ?? '' });
    await again.answer;
    await eventually(
      () => {
        expect(frames(again.text()).map((f) => f.event)).toContain('state');
      },
      5000,
      50,
    );
    again.stop();
    const replay = frames(again.text());
    const missed = seenFirst.slice(1);
    expect(replay.slice(0, missed.length)).toEqual(missed);
    expect(replay[missed.length]?.event).toBe('state');
    validateAs('LockSnapshot', replay[missed.length]?.data);
  });

  it("answers complete 502 when the API server does not take the report (the Lease's annotations are at their size limit)", async () => {
    // The lock is released by the events test: take it again, then stop the controller, so that
    // nothing else writes the Lease; the agent's term goes on.
    const held = check(
      '/v1/locks/{name}/acquire',
      'POST',
      await call(ready, 'POST', '/v1/locks/api/acquire?wait=30s'),
    ) as { held: boolean; token: string };
    expect(held.held).toBe(true);
    await controller.stop();
    controllerStopped = true;
    // Fill the Lease's annotations up to the API server's 256 KiB limit: renewals (same size) still
    // pass, a completion (one more entry) is refused 422 by the API server.
    const lease = (await getLease(t, 'api')) ?? {};
    const annotations = lease.metadata?.annotations ?? {};
    const used = Object.entries(annotations).reduce((n, [k, v]) => n + k.length + v.length, 0);
    const filler = 'example.com/filler';
    await t.leases.replaceNamespacedLease({
      namespace: t.namespace,
      name: leaseName('api'),
      body: {
        ...lease,
        metadata: {
          ...lease.metadata,
          annotations: { ...annotations, [filler]: 'x'.repeat(262_144 - used - filler.length - 16) },
        },
      },
    });
    expect(
      check(
        '/v1/locks/{name}/complete',
        'POST',
        await call(ready, 'POST', `/v1/locks/api/complete?runId=slot-2&token=${held.token}`),
      ),
    ).toMatchObject({ type: 'https://fencepost.io/problems/kubernetes-unavailable', status: 502, lock: 'api' });
  });

  it('drains for a planned handover (snapshot.draining, SSE draining), and answers drained 200 once, then 409 not-draining', async () => {
    // The controller is stopped (previous test) and the agent still holds: put the handover mark
    // on the Lease as the controller would (and drop the filler, which leaves no room for it).
    const before = check('/v1/locks/{name}', 'GET', await call(ready, 'GET', '/v1/locks/api')) as {
      held: boolean;
      token: string;
    };
    expect(before.held).toBe(true);
    expect(check('/v1/locks/{name}/drained', 'POST', await call(ready, 'POST', '/v1/locks/api/drained'))).toMatchObject(
      { type: 'https://fencepost.io/problems/not-draining', status: 409, lock: 'api' },
    );
    const stream = openStream(ready, '/v1/locks/api/events');
    await stream.answer;
    await eventually(async () => {
      const lease = (await getLease(t, 'api')) ?? {};
      const { ['example.com/filler']: _filler, ...annotations } = lease.metadata?.annotations ?? {};
      await t.leases.replaceNamespacedLease({
        namespace: t.namespace,
        name: leaseName('api'),
        body: handoverMarkedLease(
          { ...lease, metadata: { ...lease.metadata, annotations } },
          { to: { name: 'api-1', uid: 'uid-api-1' }, token: BigInt(before.token), drainMs: 60_000 },
        ),
      }); // a renewal in between is a 409: read again
    });
    const draining = await eventually(async () => {
      const s = check('/v1/locks/{name}', 'GET', await call(ready, 'GET', '/v1/locks/api')) as {
        draining?: { to: string; deadlineInMs: number };
      };
      expect(s.draining?.to).toBe('api-1');
      return s;
    });
    expect(draining.draining?.deadlineInMs).toBeGreaterThan(30_000);
    const done = check('/v1/locks/{name}/drained', 'POST', await call(ready, 'POST', '/v1/locks/api/drained')) as {
      held: boolean;
    };
    expect(done.held).toBe(false);
    await eventually(() => {
      expect(frames(stream.text()).map((f) => f.event)).toContain('released');
    });
    stream.stop();
    const notice = frames(stream.text()).find((f) => f.event === 'draining');
    validateAs('HandoverNotice', notice?.data);
    expect(notice?.data).toMatchObject({ type: 'draining', to: 'api-1', drainMs: 60_000, token: before.token });
    expect(parseLease((await getLease(t, 'api')) ?? {}).released).toBe('Released'); // the agent policy allows an agent no other kind
  });

  it('refuses a foreign Host or a browser (403) and a POST that is not JSON (415), as documented', async () => {
    for (const [path, ops] of Object.entries(doc.paths))
      for (const method of Object.keys(ops).filter((m) => m !== 'parameters')) {
        const real = path.replace('{name}', 'api');
        const m = method.toUpperCase();
        expect(check(path, m, await call(ready, m, real, { host: 'evil.example' }))).toMatchObject({
          type: 'https://fencepost.io/problems/foreign-host',
        });
        expect(check(path, m, await call(ready, m, real, { origin: 'http://evil.example' }))).toMatchObject({
          type: 'https://fencepost.io/problems/browser-request',
        });
        if (m === 'POST')
          expect(check(path, m, await call(ready, m, real, { 'content-type': 'text/plain' }))).toMatchObject({
            type: 'https://fencepost.io/problems/json-body-required',
          });
      }
  });

  it('produced every documented path, method and status with a real request', () => {
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([m]) => m !== 'parameters')
        .flatMap(([method, op]) =>
          Object.keys(op.responses ?? {}).map((status) => `${method.toUpperCase()} ${path} ${status}`),
        ),
    );
    const produced = new Set(seen.map((s) => `${s.method} ${s.path} ${s.status}`));
    expect(documented.filter((d) => !produced.has(d))).toEqual([]);
  });
});
