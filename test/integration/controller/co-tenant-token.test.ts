/**
 * A co-tenant app in the lock's namespace, with nothing but the usual client-go leader-election
 * Role (leases get/create/update, requests made with its own ServiceAccount token), lowers the
 * fencing-token annotation on a held `dlock-*` Lease. Without the chart's admission policies the
 * write goes through: the controller must say so (Warning Event LeaseTampered naming the values,
 * Ready=False while it cannot grant) and grant next above every token known — never wait for a
 * person to repair the Lease. With the chart's lease-protection policy installed the write is
 * refused (403) and the lock goes on as if nothing happened.
 */
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import {
  AdmissionregistrationV1Api,
  AuthenticationV1Api,
  CoordinationV1Api,
  RbacAuthorizationV1Api,
  loadAllYaml,
  type KubeConfig,
  type V1Lease,
  type V1ValidatingAdmissionPolicy,
  type V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLockController, type LockController } from '../../../src/controllers/distributedlock/setup.ts';
import { parseLease, renewedLease } from '../../../src/lease/record.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { TOKEN_ANNOTATION, leaseName } from '../../../src/protocol/names.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import { eventually, freshNamespace, sharedKubeConfig } from '../../support/env.ts';
import {
  createLock,
  createPod,
  getLease,
  getLock,
  lockBody,
  serviceAccountKubeConfig,
  testKube,
  type TestKube,
} from '../../support/fixtures.ts';
import { findBinary } from '../../support/testbed/assets.ts';
import { startRedis, type RedisServer } from '../../support/testbed/redis.ts';

const run = promisify(execFile);
const chart = join(resolve(import.meta.dirname, '../../..'), 'charts/fencepost');

/** outcome: the HTTP status of a call (200 when it was allowed) and the API server's message. */
async function outcome(call: () => Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await call();
    return { code: 200, message: '(allowed)' };
  } catch (err) {
    const code = (err as { code?: number }).code ?? 0;
    const body = (err as { body?: unknown }).body;
    const text = typeof body === 'string' ? body : err instanceof Error ? err.message : String(err);
    try {
      return { code, message: (JSON.parse(text) as { message?: string }).message ?? text };
    } catch {
      return { code, message: text };
    }
  }
}

/** leaderElectionApp: ServiceAccount `name` in t's namespace with the client-go leader-election Role only, and a kubeconfig with its token. */
async function leaderElectionApp(admin: KubeConfig, t: TestKube, name: string): Promise<KubeConfig> {
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await t.core.createNamespacedServiceAccount({ namespace: t.namespace, body: { metadata: { name } } });
  await rbac.createNamespacedRole({
    namespace: t.namespace,
    body: {
      metadata: { name: `${name}-leader-election` },
      // What client-go's LeaseLock calls: Get, Create, Update.
      rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] }],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: t.namespace,
    body: {
      metadata: { name: `${name}-leader-election` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `${name}-leader-election` },
      subjects: [{ kind: 'ServiceAccount', name, namespace: t.namespace }],
    },
  });
  return serviceAccountKubeConfig(admin, t.namespace, name);
}

/**
 * holderAgent renews the Lease as the holder's agent does, for as long as the Lease names `holder`
 * with `token`: an agent that sees another token on its Lease steps down and renews no more.
 */
function holderAgent(t: TestKube, lock: string, holder: string, token: bigint): () => Promise<void> {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const l = await getLease(t, lock).catch(() => undefined);
      const r = l !== undefined ? parseLease(l) : undefined;
      if (l === undefined || r?.holder?.name !== holder || r.token !== token) return;
      await t.leases
        .replaceNamespacedLease({ namespace: t.namespace, name: leaseName(lock), body: renewedLease(l, new Date()) })
        .catch(() => undefined);
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  return async () => {
    stopped = true;
    await loop;
  };
}

/**
 * lowerToken writes the Lease with its token annotation set to `value`, as `kc`: a read-modify-write
 * retried on a conflict (the holder's agent renews in between), as any client-go app would.
 */
async function lowerToken(
  kc: KubeConfig,
  t: TestKube,
  lock: string,
  value: bigint,
): Promise<{ code: number; message: string }> {
  return writeAs(kc, t, lock, (l) => ({
    ...l,
    metadata: { ...l.metadata, annotations: { ...l.metadata?.annotations, [TOKEN_ANNOTATION]: value.toString() } },
  }));
}

/** writeAs replaces the lock's Lease with edit(current), as `kc`, retrying on 409 (up to 20 times). */
async function writeAs(
  kc: KubeConfig,
  t: TestKube,
  lock: string,
  edit: (l: V1Lease) => V1Lease,
): Promise<{ code: number; message: string }> {
  for (let attempt = 1; ; attempt++) {
    const l = await getLease(t, lock);
    if (l === undefined) throw new Error('no Lease');
    const r = await outcome(() =>
      kc
        .makeApiClient(CoordinationV1Api)
        .replaceNamespacedLease({ namespace: t.namespace, name: leaseName(lock), body: edit(l) }),
    );
    if (r.code !== 409 || attempt >= 20) return r;
  }
}

const ready = async (t: TestKube, lock: string) =>
  (await getLock(t, lock)).status?.conditions?.find((c) => c.type === 'Ready');

describe('a co-tenant with the leader-election Role lowers a lock Lease token (no admission policy)', () => {
  const admin = sharedKubeConfig();
  let t: TestKube;
  let redis: RedisServer;
  let controller: LockController;
  let cotenant: KubeConfig;
  beforeAll(async () => {
    redis = await startRedis();
    t = testKube(admin, await freshNamespace(admin, 'cotenant-token-'));
    // As the README runs it: with --redis-url, locks may use either backend.
    controller = await startLockController({
      kc: admin,
      redisUrl: redis.url,
      namespace: t.namespace,
      identity: 'test-controller',
      clock: realClock,
      log: silentLogger,
    });
    cotenant = await leaderElectionApp(admin, t, 'leader-app');
  });
  afterAll(async () => {
    await controller?.stop();
    await redis?.stop();
  });

  it.each(['Lease', 'Redis'] as const)(
    '%s backend: Warning Event and Ready=False while the tampered term runs out, then a grant above every earlier token (no repair by anyone)',
    async (backend) => {
      const lock = `low-${backend.toLowerCase()}`;
      await createPod(t, `${lock}-0`, { app: lock });
      await createPod(t, `${lock}-1`, { app: lock });
      await createLock(t, lockBody(lock, lock, { leaseDurationSeconds: 3, fencing: { backend } }));
      const first = await eventually(async () => {
        const r = parseLease((await getLease(t, lock)) ?? {});
        expect(r.holder).toBeDefined();
        expect((await getLock(t, lock)).status?.fencingToken).toBe(r.token?.toString());
        return r;
      });
      const issued = first.token ?? 0n;
      const stopAgent = holderAgent(t, lock, first.holder?.name ?? '', issued);
      try {
        // The co-tenant's write goes through: nothing but RBAC stands in its way, and RBAC allows it.
        const lowered = issued - 1n;
        expect(await lowerToken(cotenant, t, lock, lowered)).toMatchObject({ code: 200 });
        const c = redis.client();
        const counter =
          backend === 'Redis' ? BigInt((await c.get(`fencepost:fence:${t.namespace}/${lock}`)) ?? '0') : 0n;
        c.disconnect();
        // While the tampered term runs out the lock cannot be granted: Ready=False, naming the field and values.
        await eventually(async () => {
          expect(await ready(t, lock)).toMatchObject({
            status: 'False',
            reason: 'LeaseTampered',
            message: expect.stringContaining(
              `annotation ${TOKEN_ANNOTATION} is ${lowered}, below status.fencingToken ${issued}`,
            ) as string,
          });
        }, 10_000);
        const warnings = await t.core.listNamespacedEvent({
          namespace: t.namespace,
          fieldSelector: `involvedObject.name=${lock},reason=LeaseTampered`,
        });
        expect(warnings.items.map((e) => e.type)).toEqual(['Warning']);
        expect(warnings.items[0]?.message).toContain(`is ${lowered}, below status.fencingToken ${issued}`);
        // The holder's agent stepped down; after a lease duration the next grant is above every token known.
        const next = await eventually(async () => {
          const r = parseLease((await getLease(t, lock)) ?? {});
          expect(r.holder).toBeDefined();
          expect(r.transitions).toBeGreaterThan(first.transitions);
          return r;
        }, 20_000);
        expect(next.token).toBeGreaterThan(issued);
        if (backend === 'Redis') expect(next.token).toBeGreaterThan(counter);
        await eventually(async () => {
          expect(await ready(t, lock)).toMatchObject({ status: 'True' });
          expect((await getLock(t, lock)).status?.fencingToken).toBe(next.token?.toString());
        });
      } finally {
        await stopAgent();
      }
    },
    60_000,
  );

  it('a Lease lowered below status and vacated by the co-tenant is granted above status after the last holder’s lease duration, with the Warning Event', async () => {
    const lock = 'low-vacant';
    await createPod(t, `${lock}-0`, { app: lock });
    await createLock(t, lockBody(lock, lock, { leaseDurationSeconds: 3, fencing: { backend: 'Lease' } }));
    const first = await eventually(async () => {
      const r = parseLease((await getLease(t, lock)) ?? {});
      expect(r.holder).toBeDefined();
      expect((await getLock(t, lock)).status?.fencingToken).toBe(r.token?.toString());
      return r;
    });
    const issued = first.token ?? 0n;
    const stopAgent = holderAgent(t, lock, first.holder?.name ?? '', issued);
    // The co-tenant lowers the token to 1 and clears the holder in one write. The holder may
    // still believe (cut off, it would not see the write): the grant waits its lease duration.
    await eventually(async () => {
      expect((await getLock(t, lock)).status?.holder?.name).toBe(first.holder?.name);
    });
    const r = await writeAs(cotenant, t, lock, (l) => {
      const { holderIdentity: _h, ...spec } = l.spec ?? {};
      return {
        ...l,
        metadata: { ...l.metadata, annotations: { ...l.metadata?.annotations, [TOKEN_ANNOTATION]: '1' } },
        spec,
      };
    });
    expect(r.code).toBe(200);
    await stopAgent();
    await eventually(async () => {
      expect((await getLock(t, lock)).status?.conditions?.find((c) => c.type === 'Held')?.reason).toBe('LeaseTampered');
    });
    const next = await eventually(async () => {
      const x = parseLease((await getLease(t, lock)) ?? {});
      expect(x.holder).toBeDefined();
      expect(x.transitions).toBeGreaterThan(first.transitions);
      return x;
    });
    expect(next.token).toBeGreaterThan(issued);
    await eventually(async () => {
      const ev = await t.core.listNamespacedEvent({
        namespace: t.namespace,
        fieldSelector: `involvedObject.name=${lock},reason=LeaseTampered`,
      });
      expect(ev.items[0]?.message).toContain(`is 1, below status.fencingToken ${issued}`);
      expect(await ready(t, lock)).toMatchObject({ status: 'True' });
    });
  }, 60_000);
});

describe("a co-tenant with the leader-election Role lowers a lock Lease token (the chart's admission policies installed)", () => {
  const admin = sharedKubeConfig();
  const adm = admin.makeApiClient(AdmissionregistrationV1Api);
  const made: { policies: string[]; bindings: string[] } = { policies: [], bindings: [] };
  let t: TestKube;
  let controller: LockController;
  let cotenant: KubeConfig;
  beforeAll(async () => {
    t = testKube(admin, await freshNamespace(admin, 'cotenant-policy-'));
    // The in-process controller runs as the admin: the admin is the chart's controller here, listed
    // in leaseProtection.extraWriters (the chart's own controller ServiceAccount is exempt by name).
    const adminName = (await admin.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} })).status
      ?.userInfo?.username;
    if (adminName === undefined) throw new Error('no username for the admin kubeconfig');
    const { stdout } = await run(
      findBinary('helm'),
      [
        'template',
        'r',
        chart,
        '--namespace',
        `${t.namespace}-release`,
        '--kube-version',
        '1.36.3',
        '--set',
        `leaseProtection.namespaces={${t.namespace}}`,
        '--set-json',
        `leaseProtection.extraWriters=${JSON.stringify([adminName])}`,
        '--show-only',
        'templates/lease-protection-policy.yaml',
      ],
      { maxBuffer: 8 * 1024 * 1024 },
    );
    for (const doc of loadAllYaml(stdout) as (V1ValidatingAdmissionPolicy | V1ValidatingAdmissionPolicyBinding)[]) {
      const name = `${doc.metadata?.name ?? ''}-${t.namespace}`;
      if (doc.kind === 'ValidatingAdmissionPolicy') {
        await adm.createValidatingAdmissionPolicy({
          body: { ...(doc as V1ValidatingAdmissionPolicy), metadata: { name } },
        });
        made.policies.push(name);
      } else {
        const b = doc as V1ValidatingAdmissionPolicyBinding;
        await adm.createValidatingAdmissionPolicyBinding({
          body: {
            ...b,
            metadata: { name },
            spec: { ...b.spec, policyName: `${b.spec?.policyName ?? ''}-${t.namespace}` },
          },
        });
        made.bindings.push(name);
      }
    }
    expect(made.policies.length).toBeGreaterThan(0);
    controller = await startLockController({
      kc: admin,
      redisUrl: undefined,
      namespace: t.namespace,
      identity: 'test-controller',
      clock: realClock,
      log: silentLogger,
    });
    cotenant = await leaderElectionApp(admin, t, 'leader-app');
  });
  afterAll(async () => {
    await controller?.stop();
    for (const name of made.bindings) await adm.deleteValidatingAdmissionPolicyBinding({ name }).catch(() => undefined);
    for (const name of made.policies) await adm.deleteValidatingAdmissionPolicy({ name }).catch(() => undefined);
  });

  it("refuses the co-tenant's write (403 from the policy); the token, the holder and Ready=True stay", async () => {
    const lock = 'guarded';
    await createPod(t, `${lock}-0`, { app: lock });
    await createPod(t, `${lock}-1`, { app: lock });
    await createLock(t, lockBody(lock, lock, { leaseDurationSeconds: 3 }));
    const first = await eventually(async () => {
      const r = parseLease((await getLease(t, lock)) ?? {});
      expect(r.holder).toBeDefined();
      return r;
    });
    const issued = first.token ?? 0n;
    const stopAgent = holderAgent(t, lock, first.holder?.name ?? '', issued);
    try {
      // The policy and the RoleBinding take a moment to be in force: probe with an impostor
      // `dlock-*` Lease (removed again if it got through) until the policy's 403 comes.
      await eventually(async () => {
        const probe = await outcome(() =>
          cotenant.makeApiClient(CoordinationV1Api).createNamespacedLease({
            namespace: t.namespace,
            body: { metadata: { name: leaseName('probe') }, spec: {} },
          }),
        );
        if (probe.code === 200)
          await t.leases.deleteNamespacedLease({ namespace: t.namespace, name: leaseName('probe') });
        expect(probe.code).toBe(403);
        expect(probe.message).toMatch(/ValidatingAdmissionPolicy/);
      }, 20_000);
      const denied = await lowerToken(cotenant, t, lock, issued - 1n);
      expect(denied.code).toBe(403);
      expect(denied.message).toMatch(/ValidatingAdmissionPolicy/);
      expect(denied.message).toContain('leader-app');
      const after = parseLease((await getLease(t, lock)) ?? {});
      expect(after.token).toBe(issued);
      expect(after.holder?.name).toBe(first.holder?.name);
      expect(await ready(t, lock)).toMatchObject({ status: 'True' });
      const ev = await t.core.listNamespacedEvent({
        namespace: t.namespace,
        fieldSelector: `involvedObject.name=${lock},reason=LeaseTampered`,
      });
      expect(ev.items).toEqual([]);
    } finally {
      await stopAgent();
    }
  }, 60_000);
});
