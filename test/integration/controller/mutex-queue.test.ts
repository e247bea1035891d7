/**
 * The Mutex queue order is the controller's, not the pod's. A pod's request annotation carries a
 * time its own agent wrote — and the agent (or the app beside it, with the same token) may rewrite
 * it: the agent policy lets an agent set its own request annotation. A request dated 1970 must not
 * jump the queue.
 *
 * Real processes on the real API server: a `fencepost controller` process; three `fencepost exec`
 * processes, each as the agent ServiceAccount with a token bound to its own pod, with the chart's
 * agent policies (test/safety/agent-policy.yaml) bound to this namespace. One holds the lock; the
 * second asks; the third asks later and then, as its own agent, dates its request 1970-01-01 (the
 * policy allows it). The holder lets go; the earlier requester must be granted first.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  RbacAuthorizationV1Api,
  loadAllYaml,
  type KubeConfig,
  type V1ValidatingAdmissionPolicy,
  type V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLease } from '../../../src/lease/record.ts';
import { podKeys } from '../../../src/protocol/names.ts';
import { eventually, freshNamespace, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';
import {
  createLock,
  getLease,
  getLock,
  lockBody,
  serviceAccountKubeConfig,
  setPodStatus,
  testKube,
  type TestKube,
  mergePatch,
} from '../../support/fixtures.ts';
import { spawnManaged, tailLog, type ManagedProcess } from '../../support/testbed/processes.ts';
import { agentBinary } from '../../support/agent-binary.ts';

const main = resolve(import.meta.dirname, '../../../src/cli/main.ts');
const POLICY_FILE = resolve(import.meta.dirname, '../../safety/agent-policy.yaml');
const AGENT_SA = 'fencepost-agent';

describe('the Mutex queue order is the controller’s, not the pod’s request time', () => {
  const kc = sharedKubeConfig();
  let t: TestKube;
  let dir: string;
  const procs: ManagedProcess[] = [];
  const policyNames: string[] = [];
  const bindingNames: string[] = [];

  const logs = (): string =>
    procs.map((p) => `--- ${p.name} (${p.isRunning() ? 'running' : 'exited'}):\n${tailLog(p.logFile, 30)}`).join('\n');

  /** agentPod creates a Ready candidate pod running as the agent ServiceAccount, and a kubeconfig with a token bound to it. */
  const agentPod = async (
    name: string,
    app: string,
  ): Promise<{ name: string; uid: string; kc: KubeConfig; kubeconfig: string }> => {
    await t.core.createNamespacedPod({
      namespace: t.namespace,
      body: {
        metadata: { name, labels: { app } },
        spec: { serviceAccountName: AGENT_SA, containers: [{ name: 'app', image: 'example.invalid/app:1' }] },
      },
    });
    const uid = (await setPodStatus(t, name, 'ready')).metadata?.uid ?? '';
    const agentKc = await serviceAccountKubeConfig(kc, t.namespace, AGENT_SA, { name, uid });
    const kubeconfig = join(dir, `${name}.kubeconfig`);
    writeFileSync(kubeconfig, agentKc.exportConfig(), { mode: 0o600 });
    return { name, uid, kc: agentKc, kubeconfig };
  };

  /** exec starts `fencepost exec --lock <lock> -- node -e <script>` as the pod's agent. */
  const exec = (
    pod: { name: string; uid: string; kubeconfig: string },
    lock: string,
    script: string,
  ): ManagedProcess => {
    const proc = spawnManaged(`exec-${pod.name}`, agentBinary(), {
      args: [
        'exec',
        '--lock',
        lock,
        '--wait',
        '60s',
        '--kubeconfig',
        pod.kubeconfig,
        '--',
        process.execPath,
        '-e',
        script,
      ],
      env: { ...process.env, POD_NAME: pod.name, POD_NAMESPACE: t.namespace, POD_UID: pod.uid },
      logFile: join(dir, `exec-${pod.name}.log`),
    });
    procs.push(proc);
    return proc;
  };

  /** startController starts a `fencepost controller` process for the namespace (leader election on short timings). */
  const startController = (identity: string): ManagedProcess => {
    const proc = spawnManaged(identity, process.execPath, {
      args: [
        main,
        'controller',
        '--kubeconfig',
        sharedKubeconfigPath(),
        '--namespace',
        t.namespace,
        '--leader-election-namespace',
        t.namespace,
        '--leader-election-lease-duration',
        '2s',
        '--leader-election-renew-deadline',
        '1500ms',
        '--leader-election-retry-period',
        '300ms',
        '--metrics-bind-address',
        '127.0.0.1:0',
        '--health-probe-bind-address',
        '127.0.0.1:0',
        '--identity',
        identity,
      ],
      logFile: join(dir, `${identity}.log`),
    });
    procs.push(proc);
    return proc;
  };
  let controller: ManagedProcess;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-queue-'));
    t = testKube(kc, await freshNamespace(kc, 'queue-'));
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await t.core.createNamespacedServiceAccount({ namespace: t.namespace, body: { metadata: { name: AGENT_SA } } });
    // The chart's agent Role (charts/fencepost/templates/agent-role.yaml).
    await rbac.createNamespacedRole({
      namespace: t.namespace,
      body: {
        metadata: { name: AGENT_SA },
        rules: [
          { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch', 'update'] },
          { apiGroups: [''], resources: ['pods'], verbs: ['patch'] },
          { apiGroups: ['fencepost.io'], resources: ['distributedlocks'], verbs: ['get'] },
          { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
        ],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: t.namespace,
      body: {
        metadata: { name: AGENT_SA },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: AGENT_SA },
        subjects: [{ kind: 'ServiceAccount', name: AGENT_SA, namespace: t.namespace }],
      },
    });
    // The chart's agent policies, bound to this namespace only (the control plane is shared).
    const adm = kc.makeApiClient(AdmissionregistrationV1Api);
    for (const doc of loadAllYaml(readFileSync(POLICY_FILE, 'utf8')) as (
      V1ValidatingAdmissionPolicy | V1ValidatingAdmissionPolicyBinding
    )[]) {
      const name = `${doc.metadata?.name ?? ''}-${t.namespace}`;
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
              policyName: `${b.spec?.policyName ?? ''}-${t.namespace}`,
              matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': t.namespace } } },
            },
          },
        });
        bindingNames.push(name);
      }
    }
    controller = startController('queue-controller-0');
  }, 60_000);

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    const adm = kc.makeApiClient(AdmissionregistrationV1Api);
    for (const name of bindingNames) await adm.deleteValidatingAdmissionPolicyBinding({ name }).catch(() => undefined);
    for (const name of policyNames) await adm.deleteValidatingAdmissionPolicy({ name }).catch(() => undefined);
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  /**
   * queueScenario: on a new Mutex lock `lock`, pod `<lock>-holder` holds it; `<lock>-early` asks,
   * then (≥ 1 s later) `<lock>-late`, whose pod was created first (so neither the pod's age nor its
   * request time favours the early one); the late pod's agent then dates its own request
   * 1970-01-01. `beforeLetGo` runs next; then the holder lets go. Returns the grant order.
   */
  const queueScenario = async (lock: string, beforeLetGo: () => Promise<void>): Promise<string[]> => {
    const keys = podKeys(lock);
    const holder = await agentPod(`${lock}-holder`, lock);
    const late = await agentPod(`${lock}-late`, lock);
    const early = await agentPod(`${lock}-early`, lock);
    let probes = 0;
    // The policies take effect once the API server has loaded them: wait until the late pod's
    // agent is refused a new label on its own pod (the policy allows only fencepost's annotations).
    await eventually(
      async () => {
        const code = await late.kc
          .makeApiClient(CoreV1Api)
          .patchNamespacedPod(
            { namespace: t.namespace, name: late.name, body: { metadata: { labels: { probe: String(++probes) } } } },
            mergePatch,
          )
          .then(
            () => 200,
            (err: unknown) => (err as { code?: number }).code ?? 0,
          );
        expect(code).toBe(403);
      },
      30_000,
      250,
    );
    await createLock(
      t,
      lockBody(lock, lock, { mode: 'Mutex', leaseDurationSeconds: 10, fencing: { backend: 'Lease' } }),
    );

    const order = join(dir, `${lock}-order`);
    const letGo = join(dir, `${lock}-let-go`);
    const record = `require('node:fs').appendFileSync(${JSON.stringify(order)}, process.env.POD_NAME + '\\n')`;
    // The holder runs until the test lets it go.
    exec(
      holder,
      lock,
      `${record}; const f = ${JSON.stringify(letGo)}; const t = setInterval(() => { if (require('node:fs').existsSync(f)) clearInterval(t); }, 50)`,
    );
    await eventually(async () => {
      expect(parseLease((await getLease(t, lock)) ?? {}).holder?.name).toBe(holder.name);
    }, 30_000).catch((err: unknown) => {
      throw new Error(logs(), { cause: err });
    });

    // The early pod asks; then, clearly later, the late one.
    exec(early, lock, record);
    await eventually(async () => {
      expect((await getLock(t, lock)).status?.queueLength).toBe(1);
    }, 20_000);
    await sleep(1000);
    exec(late, lock, record);
    await eventually(async () => {
      expect((await getLock(t, lock)).status?.queueLength).toBe(2);
    }, 20_000);
    const asked = async (name: string): Promise<string | undefined> =>
      (await t.core.readNamespacedPod({ namespace: t.namespace, name })).metadata?.annotations?.[keys.request];
    expect(Date.parse((await asked(late.name)) ?? '')).toBeGreaterThan(Date.parse((await asked(early.name)) ?? ''));

    // The late pod's agent dates its own request 1970: the agent policy allows it (its own pod,
    // fencepost's request annotation).
    await late.kc.makeApiClient(CoreV1Api).patchNamespacedPod(
      {
        namespace: t.namespace,
        name: late.name,
        body: { metadata: { uid: late.uid, annotations: { [keys.request]: '1970-01-01T00:00:00.000Z' } } },
      },
      mergePatch,
    );
    expect(await asked(late.name)).toBe('1970-01-01T00:00:00.000Z');
    await sleep(1000); // the controller sees it

    await beforeLetGo();
    writeFileSync(letGo, '');
    await eventually(
      () => {
        expect(readFileSync(order, 'utf8').trim().split('\n')).toHaveLength(3);
      },
      40_000,
      100,
    ).catch((err: unknown) => {
      throw new Error(logs(), { cause: err });
    });
    return readFileSync(order, 'utf8').trim().split('\n');
  };

  it('a later requester that dates its own request 1970-01-01 is granted after the earlier one', async () => {
    expect(await queueScenario('q', () => Promise.resolve())).toEqual(['q-holder', 'q-early', 'q-late']);
  }, 120_000);

  it('keeps the order across a controller restart (status.queue), though the late pod is the older one', async () => {
    const order = await queueScenario('r', async () => {
      // The controller's record: the early request first, the late one (dated 1970 since) behind it.
      await eventually(async () => {
        expect((await getLock(t, 'r')).status?.queue?.map((e) => e.pod)).toEqual(['r-early', 'r-late']);
      }, 10_000);
      controller.signal('SIGKILL');
      expect(await controller.exited).toBe('SIGKILL');
      controller = startController('queue-controller-1'); // no memory: only status.queue
    });
    expect(order).toEqual(['r-holder', 'r-early', 'r-late']);
  }, 120_000);
});
