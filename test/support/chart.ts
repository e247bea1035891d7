/**
 * The chart installed with a real `helm install` on the shared API server, and its Deployments run
 * as local processes with their own ServiceAccount and args (the chart's integration tests,
 * test/integration/chart/): the helm runner, the install they all start from, the run of a
 * Deployment, and SelfSubjectAccessReview questions for their RBAC checks.
 */
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { AuthorizationV1Api, KubeConfig, loadAllYaml, type V1Deployment } from '@kubernetes/client-node';
import { sharedKubeConfig, sharedKubeconfigPath } from './env.ts';
import { findBinary } from './testbed/assets.ts';
import { spawnManaged, type ManagedProcess } from './testbed/processes.ts';
import { writeServiceAccountKubeconfig } from './cluster/identity.ts';
import { FENCEPOST_MAIN, rewriteAddresses } from './cluster/pod-runner.ts';

const run = promisify(execFile);

/** CHART: the chart's folder. */
export const CHART = resolve(import.meta.dirname, '../../charts/fencepost');

/** helm runs the helm binary against the shared API server; rejects when it exits non-zero. */
export function helm(args: readonly string[]): Promise<{ stdout: string; stderr: string }> {
  return run(findBinary('helm'), ['--kubeconfig', sharedKubeconfigPath(), ...args], { maxBuffer: 16 * 1024 * 1024 });
}

/**
 * installChart runs `helm install release CHART` in namespace with `--set` sets, and returns the
 * Deployments of the release's manifest, in manifest order.
 *
 * Always set, since the API server is shared with the other test files: `crds.enabled=false` (the
 * API server has the CRD already, from crds/, not owned by Helm; test/e2e installs it from the
 * chart on a fresh cluster), and `leaseProtection.namespaces={namespace}`: the chart's default
 * protects fencepost Leases in every namespace, and the other files' admins and controllers write
 * their own Leases (a CI run saw kubectl-plugin.test.ts's admin refused while a release was
 * installed).
 */
export async function installChart(
  release: string,
  namespace: string,
  sets: readonly string[] = [],
): Promise<V1Deployment[]> {
  await helm([
    'install',
    release,
    CHART,
    '--namespace',
    namespace,
    '--set',
    'crds.enabled=false',
    '--set',
    `leaseProtection.namespaces={${namespace}}`,
    ...sets.flatMap((s) => ['--set', s]),
  ]);
  const manifest = (await helm(['get', 'manifest', release, '--namespace', namespace])).stdout;
  return loadAllYaml(manifest).filter((d) => (d as { kind?: string }).kind === 'Deployment') as V1Deployment[];
}

/** DeploymentRun is a chart Deployment run by {@link runDeployment}. */
export interface DeploymentRun {
  readonly process: ManagedProcess;
  /** serviceAccount: the Deployment's pod ServiceAccount, whose token the process uses. */
  readonly serviceAccount: string;
  /** kubeconfig: the file with that token. */
  readonly kubeconfig: string;
  readonly kc: KubeConfig;
  /** args: the container's args with their listen addresses moved (before extraArgs). */
  readonly args: readonly string[];
  /** ports: for each port of the Deployment's args, the loopback port the process listens on. */
  readonly ports: ReadonlyMap<number, number>;
}

/**
 * runDeployment runs the first container of a chart Deployment as a local fencepost process, as
 * the e2e pod runner does: with a token of the Deployment's ServiceAccount (namespace), its own
 * args with every listen address moved to a free loopback port, then extraArgs. The kubeconfig
 * and `NAME.log` are written in dir; env is added to this process's environment. The caller stops
 * the process.
 */
export async function runDeployment(
  d: V1Deployment,
  o: {
    readonly name: string;
    readonly namespace: string;
    readonly dir: string;
    readonly extraArgs?: readonly string[];
    readonly env?: Readonly<Record<string, string>>;
  },
): Promise<DeploymentRun> {
  const serviceAccount = d.spec?.template.spec?.serviceAccountName ?? '';
  const kubeconfig = await writeServiceAccountKubeconfig(
    sharedKubeConfig(),
    o.namespace,
    serviceAccount,
    join(o.dir, `${o.name}.kubeconfig`),
  );
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const { args, ports } = await rewriteAddresses(d.spec?.template.spec?.containers[0]?.args ?? []);
  const child = spawnManaged(o.name, process.execPath, {
    args: [FENCEPOST_MAIN, ...args, ...(o.extraArgs ?? [])],
    logFile: join(o.dir, `${o.name}.log`),
    env: { ...process.env, ...o.env, KUBECONFIG: kubeconfig },
  });
  return { process: child, serviceAccount, kubeconfig, kc, args, ports };
}

/** Access is one SelfSubjectAccessReview question: may this identity do verb on resource? */
export interface Access {
  readonly verb: string;
  readonly resource: string;
  readonly group?: string;
  readonly subresource?: string;
  readonly namespace?: string;
  readonly name?: string;
}

/** describeAccess says a in words, for an assertion's message: `patch fencepost.io/distributedlocks/status in NS`. */
export const describeAccess = (a: Access): string =>
  `${a.verb} ${a.group !== undefined && a.group !== '' ? `${a.group}/` : ''}${a.resource}${a.subresource !== undefined ? `/${a.subresource}` : ''}${a.name !== undefined ? ` ${a.name}` : ''}${a.namespace !== undefined ? ` in ${a.namespace}` : ' (cluster)'}`;

/** allowed asks the API server, as the identity of kc, whether it may do a. */
export async function allowed(kc: KubeConfig, a: Access): Promise<boolean> {
  const r = await kc.makeApiClient(AuthorizationV1Api).createSelfSubjectAccessReview({
    body: {
      spec: {
        resourceAttributes: {
          verb: a.verb,
          resource: a.resource,
          group: a.group ?? '',
          ...(a.subresource !== undefined ? { subresource: a.subresource } : {}),
          ...(a.namespace !== undefined ? { namespace: a.namespace } : {}),
          ...(a.name !== undefined ? { name: a.name } : {}),
        },
      },
    },
  });
  return r.status?.allowed === true;
}
