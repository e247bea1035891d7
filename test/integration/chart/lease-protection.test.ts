/**
 * A co-tenant against the chart's policy: anyone who can update a Lease could lower a lock's
 * fencing token, shorten its lease or delete it. The chart's lease-protection
 * ValidatingAdmissionPolicy (charts/fencepost/templates/lease-protection-policy.yaml), rendered by
 * helm and applied to the real API server (bound to this test's namespace only), must deny every
 * such write by a co-tenant ServiceAccount holding the usual leader-election Role, while the
 * controller's ServiceAccount and the co-tenant's own Leases are untouched by it.
 */
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { KubeConfig } from '@kubernetes/client-node';
import {
  AdmissionregistrationV1Api,
  CoordinationV1Api,
  AuthenticationV1Api,
  CustomObjectsApi,
  RbacAuthorizationV1Api,
  loadAllYaml,
  type V1Lease,
  type V1ValidatingAdmissionPolicy,
  type V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, PLURAL, VERSION } from '../../../src/api/v1alpha1/distributedlock.ts';
import { LOCK_LABEL, TOKEN_ANNOTATION, leaseName } from '../../../src/protocol/names.ts';
import { eventually, freshNamespace, sharedKubeConfig } from '../../support/env.ts';
import { createLock, lockBody, serviceAccountKubeConfig, testKube, type TestKube } from '../../support/fixtures.ts';
import { findBinary } from '../../support/testbed/assets.ts';

const run = promisify(execFile);
const chart = join(resolve(import.meta.dirname, '../../..'), 'charts/fencepost');

/** failure returns the HTTP status and the API server's message of a call (200 when it was allowed). */
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

describe('the chart keeps fencepost Leases from co-tenants (lease-protection policy)', () => {
  const admin = sharedKubeConfig();
  let t: TestKube;
  let releaseNs: string;
  let cotenant: KubeConfig;
  let controller: KubeConfig;
  const made: { policies: string[]; bindings: string[] } = { policies: [], bindings: [] };
  const adm = admin.makeApiClient(AdmissionregistrationV1Api);

  /** asServiceAccount: a kubeconfig with a token of ServiceAccount `name` in `namespace`. */
  const asServiceAccount = async (namespace: string, name: string): Promise<KubeConfig> => {
    await t.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
    return serviceAccountKubeConfig(admin, namespace, name);
  };

  /** grant gives ServiceAccount ns/name the usual leader-election Role on Leases (and lock status) in t's namespace. */
  const grant = async (ns: string, name: string): Promise<void> => {
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: t.namespace,
      body: {
        metadata: { name: `leases-${name}` },
        rules: [
          {
            apiGroups: ['coordination.k8s.io'],
            resources: ['leases'],
            verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'],
          },
          { apiGroups: ['fencepost.io'], resources: ['distributedlocks/status'], verbs: ['update', 'patch'] },
        ],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: t.namespace,
      body: {
        metadata: { name: `leases-${name}` },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `leases-${name}` },
        subjects: [{ kind: 'ServiceAccount', name, namespace: ns }],
      },
    });
  };

  beforeAll(async () => {
    t = testKube(admin, await freshNamespace(admin, 'leaseprot-'));
    releaseNs = await freshNamespace(admin, 'leaseprot-rel-');
    // The test's admin sets up the held Lease and the lock and reads them back: as an operator
    // would, it is listed in leaseProtection.extraWriters (else its set-up writes race the policy's
    // arrival in the admission chain and are refused once it is there).
    const adminName = (await admin.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} })).status
      ?.userInfo?.username;
    if (adminName === undefined) throw new Error('no username for the admin kubeconfig');
    // The chart as release "r" in releaseNs, its controller ServiceAccount r-fencepost; the policy bound here only.
    const { stdout } = await run(
      findBinary('helm'),
      [
        'template',
        'r',
        chart,
        '--namespace',
        releaseNs,
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
    ).catch((err: unknown) => ({ stdout: (err as { stdout?: string }).stdout ?? '' })); // no template: nothing applied
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
    cotenant = await asServiceAccount(t.namespace, 'cotenant-app');
    controller = await asServiceAccount(releaseNs, 'r-fencepost');
    await grant(t.namespace, 'cotenant-app');
    await grant(releaseNs, 'r-fencepost');
  });
  afterAll(async () => {
    for (const name of made.bindings) await adm.deleteValidatingAdmissionPolicyBinding({ name }).catch(() => undefined);
    for (const name of made.policies) await adm.deleteValidatingAdmissionPolicy({ name }).catch(() => undefined);
  });

  it("denies a co-tenant with a leader-election Role every write of a lock Lease and of lock status; the controller and the co-tenant's own Lease are unaffected", async () => {
    const leases = (kc: KubeConfig): CoordinationV1Api => kc.makeApiClient(CoordinationV1Api);
    const held: V1Lease = {
      metadata: {
        name: leaseName('db'),
        labels: { [LOCK_LABEL]: 'db' },
        annotations: { [TOKEN_ANNOTATION]: '500' },
      },
      spec: { holderIdentity: 'web-0/uid-0', leaseDurationSeconds: 15 },
    };
    await leases(admin).createNamespacedLease({ namespace: t.namespace, body: held });
    await createLock(t, lockBody('db', 'web'));
    const read = (): Promise<V1Lease> =>
      leases(admin).readNamespacedLease({ namespace: t.namespace, name: leaseName('db') });
    const edit = async (f: (l: V1Lease) => V1Lease): Promise<V1Lease> => f(await read());

    // The policy takes a moment to reach the API server's admission chain, and the co-tenant's
    // RoleBinding a moment to reach its authorizer: wait until a harmless probe (an impostor Lease,
    // removed again if it got through) is denied by the policy — an RBAC 403 ("cannot create")
    // means the Role is not in force yet, and the writes below would be refused for that reason.
    await eventually(async () => {
      const r = await outcome(() =>
        leases(cotenant).createNamespacedLease({
          namespace: t.namespace,
          body: { metadata: { name: leaseName('probe') }, spec: {} },
        }),
      );
      if (r.code === 200)
        await leases(admin).deleteNamespacedLease({ namespace: t.namespace, name: leaseName('probe') });
      expect(r.code).toBe(403);
      expect(r.message).toMatch(/ValidatingAdmissionPolicy/);
    }, 20_000);
    const lowered = await eventually(async () => {
      const r = await outcome(async () =>
        leases(cotenant).replaceNamespacedLease({
          namespace: t.namespace,
          name: leaseName('db'),
          body: await edit((l) => ({
            ...l,
            metadata: { ...l.metadata, annotations: { ...l.metadata?.annotations, [TOKEN_ANNOTATION]: '499' } },
          })),
        }),
      );
      expect(r.code).toBe(403);
      return r;
    }, 20_000);
    expect(lowered.message).toContain('may not UPDATE leases');
    expect(lowered.message).toContain('cotenant-app');

    const denied = {
      shorten: await outcome(async () =>
        leases(cotenant).replaceNamespacedLease({
          namespace: t.namespace,
          name: leaseName('db'),
          body: await edit((l) => ({ ...l, spec: { ...l.spec, leaseDurationSeconds: 1 } })),
        }),
      ),
      unlabel: await outcome(async () =>
        leases(cotenant).replaceNamespacedLease({
          namespace: t.namespace,
          name: leaseName('db'),
          body: await edit((l) => ({ ...l, metadata: { ...l.metadata, labels: {} } })),
        }),
      ),
      delete: await outcome(() =>
        leases(cotenant).deleteNamespacedLease({ namespace: t.namespace, name: leaseName('db') }),
      ),
      impostor: await outcome(() =>
        leases(cotenant).createNamespacedLease({
          namespace: t.namespace,
          body: { metadata: { name: leaseName('other') }, spec: { holderIdentity: 'evil/x' } },
        }),
      ),
      status: await outcome(() =>
        cotenant.makeApiClient(CustomObjectsApi).patchNamespacedCustomObjectStatus({
          group: GROUP,
          version: VERSION,
          namespace: t.namespace,
          plural: PLURAL,
          name: 'db',
          body: [{ op: 'add', path: '/status', value: { fencingToken: '9223372036854775807' } }],
        }),
      ),
    };
    expect(Object.fromEntries(Object.entries(denied).map(([k, v]) => [k, v.code]))).toEqual({
      shorten: 403,
      unlabel: 403,
      delete: 403,
      impostor: 403,
      status: 403,
    });
    const after = await read();
    expect(after.metadata?.annotations?.[TOKEN_ANNOTATION]).toBe('500');
    expect(after.spec?.leaseDurationSeconds).toBe(15);

    // Positive controls: the co-tenant's own leader-election Lease, and the controller on the lock's.
    const own = await outcome(() =>
      leases(cotenant).createNamespacedLease({
        namespace: t.namespace,
        body: { metadata: { name: 'cotenant-app-leader' }, spec: { holderIdentity: 'cotenant-0' } },
      }),
    );
    const byController = await outcome(async () =>
      leases(controller).replaceNamespacedLease({
        namespace: t.namespace,
        name: leaseName('db'),
        body: await edit((l) => ({
          ...l,
          metadata: { ...l.metadata, annotations: { ...l.metadata?.annotations, [TOKEN_ANNOTATION]: '501' } },
        })),
      }),
    );
    expect({ own: own.code, byController: byController.code }).toEqual({ own: 200, byController: 200 });
  });
});
