import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  loadAllYaml,
  loadYaml,
  type V1ClusterRole,
  type V1ClusterRoleBinding,
  type V1Deployment,
  type V1Pod,
  type V1Service,
} from '@kubernetes/client-node';
import { createControllerMetrics } from '../../../src/observability/metrics.ts';
import { HANDOVER_MARK_ANNOTATION } from '../../../src/protocol/handover.ts';
import {
  LOCK_LABEL,
  RELEASE_ANNOTATION,
  RENEW_DEADLINE_ANNOTATION,
  RENEW_PERIOD_ANNOTATION,
  TOKEN_ANNOTATION,
  podKeys,
} from '../../../src/protocol/names.ts';
import { findBinary } from '../../support/testbed/assets.ts';
import { freshNamespace, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../../..');
const chart = join(root, 'charts/fencepost');
const KUBE_VERSION = '1.36.3';

interface Result {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** helm runs the testbed's helm and returns its exit code and output (never throws on a non-zero exit). */
async function helm(args: readonly string[]): Promise<Result> {
  try {
    const { stdout, stderr } = await run(findBinary('helm'), [...args], { cwd: root, maxBuffer: 32 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: unknown; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? String(err) };
  }
}

/** template renders the chart as release "r"; the arguments are appended (--set, -f). */
function template(namespace: string, extra: readonly string[] = []): Promise<Result> {
  return helm(['template', 'r', chart, '--namespace', namespace, '--kube-version', KUBE_VERSION, ...extra]);
}

/** kubectlApply pipes manifests to `kubectl apply --dry-run=server -f - -n NS` on the shared API server. */
function kubectlApply(manifests: string, namespace: string): Promise<Result> {
  return kubectl(['apply', '--dry-run=server', '-f', '-', '-n', namespace], manifests);
}

/** kubectl runs the testbed's kubectl on the shared API server with stdin, never throwing on a non-zero exit. */
function kubectl(args: readonly string[], stdin = ''): Promise<Result> {
  return new Promise((done, fail) => {
    const child = spawn(findBinary('kubectl'), ['--kubeconfig', sharedKubeconfigPath(), ...args], { cwd: root });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', fail);
    child.on('close', (code) => {
      done({ code: code ?? 1, stdout, stderr });
    });
    child.stdin.end(stdin);
  });
}

/** Manifest is what every rendered object has: a kind and metadata. */
interface Manifest {
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly labels?: Record<string, string> };
}

/** docsOf splits rendered manifests into the documents of one kind. */
function docsOf(manifests: string, kind: string): string[] {
  return manifests.split(/^---$/m).filter((d) => new RegExp(`^kind: ${kind}$`, 'm').test(d));
}

/** schemaPaths lists every dotted key path the values schema declares under properties. */
function schemaPaths(schema: unknown, prefix = ''): string[] {
  const props = (schema as { properties?: Record<string, unknown> }).properties ?? {};
  return Object.entries(props).flatMap(([k, v]) => [`${prefix}${k}`, ...schemaPaths(v, `${prefix}${k}.`)]);
}

/**
 * valuePaths lists every dotted key path of a values object, not into lists, and not into
 * free-form maps (where the schema declares no properties: resources.requests, nodeSelector).
 */
function valuePaths(values: unknown, schema: unknown, prefix = ''): string[] {
  if (typeof values !== 'object' || values === null || Array.isArray(values)) return [];
  const props = (schema as { properties?: Record<string, unknown> } | undefined)?.properties;
  if (props === undefined) return [];
  return Object.entries(values).flatMap(([k, v]) => [`${prefix}${k}`, ...valuePaths(v, props[k], `${prefix}${k}.`)]);
}

/** deploymentArgs pulls the controller container's args out of rendered manifests. */
function deploymentArgs(manifests: string): string[] {
  const doc = manifests.split(/^---$/m).find((d) => /^kind: Deployment$/m.test(d));
  if (doc === undefined) throw new Error('no Deployment rendered');
  const block = /^ {10}args:\n((?: {12}- .*\n)+)/m.exec(doc);
  if (block?.[1] === undefined) throw new Error('no args in the Deployment');
  return block[1]
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.replace(/^ {12}- /, ''));
}

// The chart as an operator sees it: it lints, renders, is accepted by a real API server, rejects
// bad values naming the key, and ships the CRD of crds/ unchanged.
describe('the fencepost Helm chart', () => {
  const kc = sharedKubeConfig();
  let ns = '';
  let dir = '';

  beforeAll(async () => {
    ns = await freshNamespace(kc, 'chart-');
    dir = mkdtempSync(join(tmpdir(), 'fencepost-chart-'));
  });
  afterAll(() => {
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('passes helm lint --strict', async () => {
    const r = await helm(['lint', '--strict', chart]);
    expect(r.stderr + r.stdout).toContain('0 chart(s) failed');
    expect(r.code).toBe(0);
  });

  it('renders with the defaults, and the API server accepts every object (dry run)', async () => {
    const system = await template('fencepost-system');
    expect(system.code, system.stderr).toBe(0);
    for (const kind of [
      'Deployment',
      'ServiceAccount',
      'ClusterRole',
      'ClusterRoleBinding',
      'Role',
      'RoleBinding',
      'Service',
      'PodDisruptionBudget',
      'CustomResourceDefinition',
    ]) {
      expect(system.stdout).toMatch(new RegExp(`^kind: ${kind}$`, 'm'));
    }
    expect(system.stdout).toContain('--leader-election-namespace=fencepost-system');
    expect(system.stdout).toContain('helm.sh/resource-policy: keep');
    expect(deploymentArgs(system.stdout)).not.toContainEqual(expect.stringMatching(/^--redis-url/));

    // Namespaced objects carry metadata.namespace, so the dry run renders into the fresh
    // namespace itself (kubectl refuses an object whose namespace differs from -n).
    const here = await template(ns, ['--set', `agentRbac.namespaces={${ns}}`]);
    expect(here.code, here.stderr).toBe(0);
    const applied = await kubectlApply(here.stdout, ns);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain(`deployment.apps/r-fencepost created (server dry run)`);
    expect(applied.stdout).toContain('role.rbac.authorization.k8s.io/r-fencepost-agent created (server dry run)');
  });

  it('renders the Redis backend and one --namespace per watched namespace', async () => {
    const r = await template(ns, [
      '--set',
      'fencing.backend=Redis',
      '--set',
      'fencing.redisUrl=redis://r:6379',
      '--set',
      'watchNamespaces={a,b}',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const args = deploymentArgs(r.stdout);
    expect(args[0]).toBe('controller');
    expect(args).toContain('--redis-url=redis://r:6379');
    expect(args.filter((a) => a.startsWith('--namespace='))).toEqual(['--namespace=a', '--namespace=b']);
    // Its per-namespace Roles go to a and b; the dry run of that layout is the next test's.
  });

  it('with shards above 1: --shards, Lease RBAC for the shard and membership Leases, a per-shard no-leader alert; refused without leader election', async () => {
    const plain = await template(ns, ['--set', 'prometheusRule.enabled=true']);
    expect(plain.code, plain.stderr).toBe(0);
    expect(deploymentArgs(plain.stdout)).not.toContainEqual(expect.stringMatching(/^--shards/));
    const r = await template(ns, [
      '--set',
      'shards=12',
      '--set',
      'replicaCount=3',
      '--set',
      'prometheusRule.enabled=true',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(deploymentArgs(r.stdout)).toContain('--shards=12');
    const role = docsOf(r.stdout, 'Role').find((d) => d.includes('-leader-election'));
    expect(role).toMatch(/verbs: \["get", "list", "update"\]/);
    expect(r.stdout).toContain('name=~"fencepost-controller-shard-[0-9]+"} == 1) < 12');
    // The controller's Lease admission policy lets its shard and membership Leases through.
    expect(r.stdout).toContain('request.name.startsWith(\\"fencepost-controller-shard-\\")');
    expect(r.stdout).toContain('request.name.startsWith(\\"fencepost-controller-member-\\")');
    const bare = await template(ns, ['--set', 'shards=12', '--set', `agentRbac.namespaces={${ns}}`]);
    expect(bare.code, bare.stderr).toBe(0);
    const applied = await kubectlApply(bare.stdout, ns);
    expect(applied.code, applied.stderr).toBe(0);
    const off = await template(ns, ['--set', 'shards=4', '--set', 'leaderElection.enabled=false']);
    expect(off.code).not.toBe(0);
    expect(off.stderr).toContain('shards: 4 needs leaderElection.enabled');
    const zero = await template(ns, ['--set', 'shards=0']);
    expect(zero.code).not.toBe(0);
    expect(zero.stderr).toContain('shards');
  });

  it('rejects an unknown key, naming it', async () => {
    const file = join(dir, 'unknown.yaml');
    writeFileSync(file, 'replicas: 3\n');
    const r = await template('fencepost-system', ['-f', file]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('replicas');
    expect(r.stderr).toMatch(/additional properties 'replicas' not allowed/i);
  });

  it('rejects an unknown fencing backend, naming the key', async () => {
    const file = join(dir, 'backend.yaml');
    writeFileSync(file, 'fencing:\n  backend: Zookeeper\n');
    const r = await template('fencepost-system', ['-f', file]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('fencing');
    expect(r.stderr).toContain('backend');
    expect(r.stderr).toMatch(/Redis|Lease/);
  });

  it('rejects a wrong type, naming the key', async () => {
    const r = await template('fencepost-system', ['--set-string', 'workers=four']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('workers');
  });

  it('requires fencing.redisUrl with the Redis backend', async () => {
    const r = await template('fencepost-system', ['--set', 'fencing.backend=Redis']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('fencing.redisUrl is required when fencing.backend is Redis');
  });

  it('ships a byte-identical copy of crds/distributedlocks.fencepost.io.yaml', () => {
    const source = readFileSync(join(root, 'crds/distributedlocks.fencepost.io.yaml'));
    const copy = readFileSync(join(chart, 'files/distributedlocks.fencepost.io.yaml'));
    expect(copy.equals(source)).toBe(true);
  });

  it('leaves the CRD out with crds.enabled=false and the keep annotation out with crds.keep=false', async () => {
    const off = await template('fencepost-system', ['--set', 'crds.enabled=false']);
    expect(off.code, off.stderr).toBe(0);
    expect(off.stdout).not.toMatch(/^kind: CustomResourceDefinition$/m);
    const noKeep = await template('fencepost-system', ['--set', 'crds.keep=false']);
    expect(noKeep.code, noKeep.stderr).toBe(0);
    expect(noKeep.stdout).toMatch(/^kind: CustomResourceDefinition$/m);
    expect(noKeep.stdout).not.toContain('helm.sh/resource-policy');
  });

  it('documents every value in values.yaml (a "# <key> --" comment) and declares it in the schema', () => {
    const text = readFileSync(join(chart, 'values.yaml'), 'utf8');
    const values = loadYaml(text);
    const schema: unknown = JSON.parse(readFileSync(join(chart, 'values.schema.json'), 'utf8'));
    const declared = new Set(schemaPaths(schema));
    const paths = valuePaths(values, schema);
    expect(paths.length).toBeGreaterThan(50);
    for (const path of paths) {
      expect(text, `values.yaml documents ${path}`).toContain(`# ${path} --`);
      expect(declared.has(path), `values.schema.json declares ${path}`).toBe(true);
    }
  });

  it('with watchNamespaces, grants the controller Roles in those namespaces only; cluster-wide only the metrics checks, and nothing with metrics.secure=false', async () => {
    const r = await template(ns, ['--set', `watchNamespaces={${ns}}`]);
    expect(r.code, r.stderr).toBe(0);
    // TokenReview and SubjectAccessReview are cluster-scoped: the secure metrics listener's ClusterRoles.
    const clusterWide = (out: string) =>
      (loadAllYaml(out) as (Manifest | null)[])
        .filter((d): d is Manifest => d !== null && /^ClusterRole(Binding)?$/.test(d.kind))
        .map((d) => `${d.kind} ${d.metadata.name}`)
        .sort();
    expect(clusterWide(r.stdout)).toEqual([
      'ClusterRole r-fencepost-metrics-auth',
      'ClusterRole r-fencepost-metrics-reader',
      'ClusterRoleBinding r-fencepost-metrics-auth',
      'ClusterRoleBinding r-fencepost-test-metrics-reader', // the helm test hook's reader
    ]);
    const roles = docsOf(r.stdout, 'Role');
    expect(roles.map((d) => /^ {2}name: (.*)$/m.exec(d)?.[1]).sort()).toEqual([
      'r-fencepost-controller',
      'r-fencepost-leader-election',
    ]);
    for (const role of roles) expect(role).toContain(`namespace: ${ns}`);
    const applied = await kubectlApply(r.stdout, ns);
    expect(applied.code, applied.stderr).toBe(0);
    const plain = await template(ns, ['--set', `watchNamespaces={${ns}}`, '--set', 'metrics.secure=false']);
    expect(plain.code, plain.stderr).toBe(0);
    expect(clusterWide(plain.stdout)).toEqual([]);
  });

  it('serves /metrics over HTTPS by default: the metrics-auth and metrics-reader ClusterRoles, the ServiceMonitor with a bearer token, a mounted certificate with metrics.certSecret, plain HTTP with metrics.secure=false', async () => {
    const rendered = await template(ns, [
      '--set',
      'serviceMonitor.enabled=true',
      '--set',
      `metrics.readers[0].kind=ServiceAccount,metrics.readers[0].name=prometheus,metrics.readers[0].namespace=${ns}`,
    ]);
    expect(rendered.code, rendered.stderr).toBe(0);
    const docs = (loadAllYaml(rendered.stdout) as (Manifest | null)[]).filter((d): d is Manifest => d !== null);
    const clusterRole = (name: string) =>
      docs.find((d) => d.kind === 'ClusterRole' && d.metadata.name === name) as V1ClusterRole | undefined;
    expect(clusterRole('r-fencepost-metrics-reader')?.rules).toEqual([
      { nonResourceURLs: ['/metrics'], verbs: ['get'] },
    ]);
    expect(clusterRole('r-fencepost-metrics-auth')?.rules).toEqual([
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
      { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
    ]);
    const binding = (name: string) =>
      docs.find((d) => d.kind === 'ClusterRoleBinding' && d.metadata.name === name) as V1ClusterRoleBinding | undefined;
    expect(binding('r-fencepost-metrics-auth')?.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'r-fencepost', namespace: ns },
    ]);
    expect(binding('r-fencepost-metrics-reader')?.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'prometheus', namespace: ns },
    ]);
    const args = deploymentArgs(rendered.stdout);
    expect(args).toContain('--metrics-bind-address=0.0.0.0:8443');
    expect(args).toContain('--metrics-secure=true');
    expect(args).not.toContainEqual(expect.stringMatching(/^--metrics-cert-dir/));
    const service = docs.find((d) => d.kind === 'Service' && d.metadata.name === 'r-fencepost-metrics') as V1Service;
    expect(service.spec?.ports).toEqual([
      { name: 'metrics', port: 8443, targetPort: 'metrics', protocol: 'TCP', appProtocol: 'https' },
    ]);
    // The helm test pod reads it with the token of its own ServiceAccount, a metrics reader.
    const testPod = docs.find((d) => d.kind === 'Pod' && d.metadata.name === 'r-fencepost-test-metrics') as V1Pod;
    expect(testPod.spec?.serviceAccountName).toBe('r-fencepost-test');
    expect(testPod.spec?.containers[0]?.command?.join(' ')).toMatch(
      new RegExp(`Authorization: Bearer .*https://r-fencepost-metrics\\.${ns}\\.svc:8443/metrics`),
    );
    const [monitor] = docsOf(rendered.stdout, 'ServiceMonitor');
    expect(monitor).toMatch(
      /scheme: https\n\s+bearerTokenFile: \/var\/run\/secrets\/kubernetes.io\/serviceaccount\/token\n\s+tlsConfig:\n(\s+#.*\n)?\s+insecureSkipVerify: true\n/,
    );

    const mounted = await template(ns, [
      '--set',
      'serviceMonitor.enabled=true',
      '--set',
      'metrics.certSecret=metrics-tls',
    ]);
    expect(mounted.code, mounted.stderr).toBe(0);
    expect(deploymentArgs(mounted.stdout)).toContain('--metrics-cert-dir=/etc/fencepost/metrics-certs');
    const pod = (
      (loadAllYaml(mounted.stdout) as (Manifest | null)[]).find(
        (d) => d?.kind === 'Deployment' && d.metadata.name === 'r-fencepost',
      ) as V1Deployment
    ).spec?.template.spec;
    expect(pod?.volumes).toEqual([{ name: 'metrics-certs', secret: { secretName: 'metrics-tls' } }]);
    expect(pod?.containers[0]?.volumeMounts).toEqual([
      { name: 'metrics-certs', mountPath: '/etc/fencepost/metrics-certs', readOnly: true },
    ]);
    const [verified] = docsOf(mounted.stdout, 'ServiceMonitor');
    expect(verified).toContain(`serverName: r-fencepost-metrics.${ns}.svc`);
    expect(verified).toMatch(/ca:\n\s+secret:\n\s+name: metrics-tls\n\s+key: ca.crt/);
    expect(verified).not.toContain('insecureSkipVerify');

    const plain = await template(ns, ['--set', 'serviceMonitor.enabled=true', '--set', 'metrics.secure=false']);
    expect(plain.code, plain.stderr).toBe(0);
    expect(deploymentArgs(plain.stdout)).toContain('--metrics-secure=false');
    expect(docsOf(plain.stdout, 'ServiceMonitor')[0]).not.toMatch(/scheme|bearerTokenFile|tlsConfig/);
    expect(
      (loadAllYaml(plain.stdout) as (Manifest | null)[]).filter((d) =>
        /metrics-(auth|reader)/.test(d?.metadata.name ?? ''),
      ),
    ).toEqual([]);

    const bad = await template(ns, ['--set', 'metrics.readers[0].kind=Robot,metrics.readers[0].name=x']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('metrics/readers/0/kind');
  });

  it('takes the Redis URL from an existing Secret as FENCEPOST_REDIS_URL, not from the args', async () => {
    const r = await template(ns, [
      '--set',
      'fencing.backend=Redis',
      '--set',
      'fencing.redisUrlSecret.name=redis-auth',
      '--set',
      'fencing.redisUrlSecret.key=uri',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(deploymentArgs(r.stdout)).not.toContainEqual(expect.stringMatching(/^--redis-url/));
    expect(r.stdout).toMatch(
      /- name: FENCEPOST_REDIS_URL\n\s+valueFrom:\n\s+secretKeyRef:\n\s+name: redis-auth\n\s+key: uri\n/,
    );
  });

  it('renders a ServiceMonitor and a PrometheusRule that the API server accepts, with the four alerts the operations guide describes', async () => {
    const crds = await kubectl(['apply', '-f', join(import.meta.dirname, 'fixtures/monitoring-crds.yaml')]);
    expect(crds.code, crds.stderr).toBe(0);
    const est = await kubectl([
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      'crd/servicemonitors.monitoring.coreos.com',
      'crd/prometheusrules.monitoring.coreos.com',
    ]);
    expect(est.code, est.stderr).toBe(0);
    const r = await template(ns, [
      '--set',
      'serviceMonitor.enabled=true',
      '--set',
      'prometheusRule.enabled=true',
      '--set',
      'prometheusRule.noHolderFor=7m',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const [monitor] = docsOf(r.stdout, 'ServiceMonitor');
    expect(monitor).toContain('port: metrics');
    const [rule] = docsOf(r.stdout, 'PrometheusRule');
    const alerts = [...(rule ?? '').matchAll(/- alert: (\w+)/g)].map((m) => m[1]);
    expect(alerts).toEqual(
      expect.arrayContaining([
        'FencepostLockWithoutHolder',
        'FencepostFrequentInvoluntaryExpiries',
        'FencepostRedisUnavailable',
        'FencepostReconcileErrors',
      ]),
    );
    expect(rule).toMatch(/alert: FencepostLockWithoutHolder\n\s+#.*\n\s+expr: .*\n\s+for: 7m/);
    const applied = await kubectlApply(r.stdout, ns);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain('prometheusrule.monitoring.coreos.com/r-fencepost created (server dry run)');
  });

  it("renders the agents' PodMonitor over agentRbac.namespaces, keeping the fencepost-agent container, and the Grafana dashboard ConfigMap; the API server accepts both", async () => {
    const crds = await kubectl(['apply', '-f', join(import.meta.dirname, 'fixtures/monitoring-crds.yaml')]);
    expect(crds.code, crds.stderr).toBe(0);
    const est = await kubectl([
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      'crd/podmonitors.monitoring.coreos.com',
    ]);
    expect(est.code, est.stderr).toBe(0);
    const r = await template(ns, [
      '--set',
      'agentPodMonitor.enabled=true',
      '--set',
      `agentRbac.namespaces={${ns}}`,
      '--set',
      'grafanaDashboard.enabled=true',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const [monitor] = docsOf(r.stdout, 'PodMonitor');
    expect(monitor).toMatch(new RegExp(`matchNames:\\n\\s+- ${ns}\\n`));
    expect(monitor).toMatch(
      /sourceLabels: \[__meta_kubernetes_pod_container_name\]\n\s+regex: fencepost-agent\n\s+action: keep/,
    );
    const [dashboard] = docsOf(r.stdout, 'ConfigMap').filter((d) => d.includes('grafana_dashboard'));
    expect(dashboard).toContain('"uid": "fencepost"');
    const applied = await kubectlApply(r.stdout, ns);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain('podmonitor.monitoring.coreos.com/r-fencepost-agents created (server dry run)');
    const none = await template(ns, ['--set', 'agentPodMonitor.enabled=true']);
    expect(none.code).not.toBe(0);
    expect(none.stderr).toContain('agentPodMonitor.enabled needs agentRbac.namespaces');
  });

  it('alerts only on metrics the controller exports', async () => {
    const r = await template(ns, ['--set', 'prometheusRule.enabled=true']);
    expect(r.code, r.stderr).toBe(0);
    const exprs = [...(docsOf(r.stdout, 'PrometheusRule')[0] ?? '').matchAll(/^\s+expr: (.*)$/gm)]
      .map((m) => m[1] ?? '')
      .join('\n');
    const named = new Set([...exprs.matchAll(/\b([a-z_][a-z0-9_]*)\{/g)].map((m) => m[1] ?? ''));
    expect([...named]).toEqual(
      expect.arrayContaining([
        'fencepost_locks',
        'controller_runtime_reconcile_errors_total',
        'leader_election_master_status',
      ]),
    );
    const exported = await createControllerMetrics().registry.metrics();
    for (const metric of named) expect(exported, metric).toMatch(new RegExp(`^# TYPE ${metric} `, 'm'));
  });

  it('rejects a malformed alert duration, naming the key', async () => {
    const r = await template('fencepost-system', ['--set', 'prometheusRule.noHolderFor=five minutes']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('noHolderFor');
  });

  it("ships the agent admission policies of test/safety/agent-policy.yaml, matching the chart's agent ServiceAccount in agentRbac.namespaces only", async () => {
    interface Doc {
      kind: string;
      metadata: { name: string };
      spec: { matchConditions?: { expression: string }[]; matchResources?: unknown; policyName?: string } & Record<
        string,
        unknown
      >;
    }
    const r = await template(ns, [
      '--set',
      'agentRbac.namespaces={a,b}',
      '--set',
      'agentRbac.serviceAccountName=locker',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const rendered = (loadAllYaml(r.stdout) as (Doc | null)[]).filter(
      (d): d is Doc =>
        d !== null && d.kind.startsWith('ValidatingAdmissionPolicy') && d.metadata.name.includes('-agent-'),
    );
    const proven = loadAllYaml(readFileSync(join(root, 'test/safety/agent-policy.yaml'), 'utf8')) as Doc[];
    expect(rendered.map((d) => `${d.kind} ${d.metadata.name}`).sort()).toEqual(
      proven.map((d) => `${d.kind} r-${d.metadata.name}`).sort(),
    );
    for (const d of rendered) {
      const twin = proven.find((p) => p.kind === d.kind && `r-${p.metadata.name}` === d.metadata.name);
      if (d.kind === 'ValidatingAdmissionPolicy') {
        // Identical but for who is matched: the chart names its agent ServiceAccount in each granted namespace.
        const { matchConditions, ...rest } = d.spec;
        const { matchConditions: _m, ...provenRest } = twin?.spec ?? {};
        expect(rest).toEqual(provenRest);
        expect(matchConditions?.map((c) => c.expression)).toEqual([
          'request.userInfo.username in ["system:serviceaccount:a:locker","system:serviceaccount:b:locker"]',
        ]);
      } else {
        expect(d.spec.policyName).toBe(d.metadata.name);
        expect(d.spec.matchResources).toEqual({
          namespaceSelector: {
            matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['a', 'b'] }],
          },
        });
      }
    }
    // The agent policies follow agentRbac.admissionPolicies.enabled; the lease-protection policy
    // (lease-protection.test.ts) follows leaseProtection.enabled alone.
    const agentPolicy = /^kind: ValidatingAdmissionPolicy(Binding)?\nmetadata:\n {2}name: r-fencepost-agent-/m;
    const off = await template(ns, [
      '--set',
      'agentRbac.namespaces={a}',
      '--set',
      'agentRbac.admissionPolicies.enabled=false',
    ]);
    expect(off.stdout).not.toMatch(agentPolicy);
    const none = await template(ns);
    expect(none.stdout).not.toMatch(agentPolicy);
    expect(none.stdout).toMatch(/^ {2}name: r-fencepost-leases$/m);
    const unprotected = await template(ns, ['--set', 'leaseProtection.enabled=false']);
    expect(unprotected.stdout).not.toMatch(/^ {2}name: r-fencepost-leases$/m);
    // The controller's own policies follow rbac.admissionPolicies.enabled (and rbac.create).
    expect(none.stdout).toMatch(/^ {2}name: r-fencepost-controller-leases$/m);
    expect(none.stdout).toMatch(/^ {2}name: r-fencepost-controller-pods$/m);
    const noController = await template(ns, [
      '--set',
      'rbac.admissionPolicies.enabled=false',
      '--set',
      'leaseProtection.enabled=false',
    ]);
    expect(noController.stdout).not.toMatch(/^kind: ValidatingAdmissionPolicy/m);
  });

  it("names in its CEL policies only the protocol's label and annotation keys (src/protocol)", async () => {
    const r = await template(ns, ['--set', 'agentRbac.namespaces={a}']);
    expect(r.code, r.stderr).toBe(0);
    const cel = (loadAllYaml(r.stdout) as ({ kind: string; spec: unknown } | null)[])
      .filter((d) => d?.kind === 'ValidatingAdmissionPolicy')
      .map((d) => JSON.stringify(d?.spec))
      .join('\n');
    // Whole keys: fencepost.io/NAME.
    const whole = new Set(
      [...cel.matchAll(/(?<![.\w])fencepost\.io\/([a-z-]+)/g)].map((m) => `fencepost.io/${m[1] ?? ''}`),
    );
    const known = new Set<string>([
      LOCK_LABEL,
      TOKEN_ANNOTATION,
      RELEASE_ANNOTATION,
      RENEW_DEADLINE_ANNOTATION,
      RENEW_PERIOD_ANNOTATION,
      HANDOVER_MARK_ANNOTATION,
    ]);
    expect([...whole].filter((k) => !known.has(k))).toEqual([]);
    expect(whole.size).toBeGreaterThan(0);
    // Per-lock pod keys: <lock>.lock.fencepost.io/SUFFIX, written out or listed as suffixes.
    const suffixes = new Set(
      (Object.values(podKeys('')) as string[]).map((k) => k.replace(/^\.lock\.fencepost\.io\//, '')),
    );
    const written = [...cel.matchAll(/\.lock\.fencepost\.io\/([a-z-]+)/g)].map((m) => m[1] ?? '');
    const listed = [...cel.matchAll(/\[((?:\\?'[a-z-]+\\?'(?:, )?)+)\]/g)].flatMap((m) =>
      (m[1] ?? '').split(', ').map((x) => x.replaceAll(/\\?'/g, '')),
    );
    expect(listed.length).toBeGreaterThan(0);
    expect([...written, ...listed].filter((k) => !suffixes.has(k))).toEqual([]);
  });

  it('leaves the dashboard out by default', async () => {
    const r = await template(ns);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toMatch(/dashboard/);
  });

  it('with dashboard.enabled, renders a read-only dashboard: its own Deployment, ServiceAccount, ClusterRole and Service, which the API server accepts', async () => {
    const r = await template(ns, ['--set', 'dashboard.enabled=true']);
    expect(r.code, r.stderr).toBe(0);
    const docs = (loadAllYaml(r.stdout) as (Manifest | null)[]).filter(
      (d): d is Manifest => d !== null && d.metadata.labels?.['app.kubernetes.io/component'] === 'dashboard',
    );
    expect(docs.map((d) => `${d.kind} ${d.metadata.name}`).sort()).toEqual([
      'ClusterRole r-fencepost-dashboard',
      'ClusterRoleBinding r-fencepost-dashboard',
      'Deployment r-fencepost-dashboard',
      'Service r-fencepost-dashboard',
      'ServiceAccount r-fencepost-dashboard',
    ]);
    const deployment = docs.find((d) => d.kind === 'Deployment') as V1Deployment;
    const pod = deployment.spec?.template.spec;
    const container = pod?.containers[0];
    // Loopback in its pod by default, like the command: reached with kubectl port-forward.
    expect(container?.args).toEqual(['dashboard', '--address=127.0.0.1:8300', '--log-level=info']);
    expect(container?.ports).toEqual([{ name: 'http', containerPort: 8300, protocol: 'TCP' }]);
    expect(container?.readinessProbe).toBeUndefined(); // the kubelet probes the pod IP, where nothing listens
    expect(container?.securityContext?.readOnlyRootFilesystem).toBe(true);
    expect(pod?.serviceAccountName).toBe('r-fencepost-dashboard');
    // Its pods are its own: the controller's Deployment and Services must not select them, nor it theirs.
    expect(deployment.spec?.selector.matchLabels?.['app.kubernetes.io/component']).toBe('dashboard');
    const service = docs.find((d) => d.kind === 'Service') as V1Service;
    expect(service.spec?.selector?.['app.kubernetes.io/component']).toBe('dashboard');
    expect(service.spec?.ports).toEqual([{ name: 'http', port: 8300, targetPort: 'http', protocol: 'TCP' }]);
    // Read-only RBAC: reading verbs only, on what the dashboard reads.
    const role = docs.find((d) => d.kind === 'ClusterRole') as V1ClusterRole;
    expect(role.rules?.map((rule) => `${rule.resources?.join()}: ${rule.verbs.join()}`)).toEqual([
      'distributedlocks: list,watch',
      'leases: get,list,watch',
      'events: list,watch',
      'pods: get',
    ]);
    const binding = docs.find((d) => d.kind === 'ClusterRoleBinding') as V1ClusterRoleBinding;
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'r-fencepost-dashboard', namespace: ns }]);
    const applied = await kubectlApply(r.stdout, ns);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain('deployment.apps/r-fencepost-dashboard created (server dry run)');
  });

  it('serves the dashboard beyond loopback only with dashboard.allowRemote, and one namespace with a Role there', async () => {
    const refused = await template(ns, ['--set', 'dashboard.enabled=true', '--set', 'dashboard.address=0.0.0.0:8300']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('set dashboard.allowRemote=true');
    const r = await template(ns, [
      '--set',
      'dashboard.enabled=true',
      '--set',
      'dashboard.address=0.0.0.0:9090',
      '--set',
      'dashboard.allowRemote=true',
      '--set',
      `dashboard.namespace=${ns}`,
    ]);
    expect(r.code, r.stderr).toBe(0);
    const docs = (loadAllYaml(r.stdout) as (Manifest | null)[]).filter(
      (d): d is Manifest => d !== null && d.metadata.labels?.['app.kubernetes.io/component'] === 'dashboard',
    );
    expect(docs.map((d) => d.kind).sort()).toEqual(['Deployment', 'Role', 'RoleBinding', 'Service', 'ServiceAccount']);
    expect(docs.find((d) => d.kind === 'Role')?.metadata.namespace).toBe(ns);
    const container = (docs.find((d) => d.kind === 'Deployment') as V1Deployment).spec?.template.spec?.containers[0];
    expect(container?.args).toEqual([
      'dashboard',
      '--address=0.0.0.0:9090',
      '--allow-remote',
      `--namespace=${ns}`,
      '--log-level=info',
    ]);
    expect(container?.readinessProbe?.tcpSocket?.port).toBe('http');
    expect((docs.find((d) => d.kind === 'Service') as V1Service).spec?.ports?.[0]?.port).toBe(9090);
    const bad = await template(ns, ['--set', 'dashboard.enabled=true', '--set', 'dashboard.address=127.0.0.1:0']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('/dashboard/address');
  });

  it('renders strict YAML (no duplicate keys) with every optional object on', async () => {
    const r = await template(ns, [
      '--set',
      `agentRbac.namespaces={${ns}}`,
      '--set',
      'serviceMonitor.enabled=true',
      '--set',
      'prometheusRule.enabled=true',
      '--set',
      'fencing.backend=Redis',
      '--set',
      'fencing.redisUrlSecret.name=redis-auth',
      '--set',
      `watchNamespaces={${ns}}`,
      '--set',
      'dashboard.enabled=true',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const docs = loadAllYaml(r.stdout).filter((d) => d !== null) as {
      kind: string;
      metadata: { labels?: Record<string, string> };
    }[];
    expect(docs.length).toBeGreaterThanOrEqual(15);
    for (const d of docs) expect(d.metadata.labels?.['app.kubernetes.io/instance'], d.kind).toBe('r');
  });
});
