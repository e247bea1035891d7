/**
 * useE2eCluster: what every end-to-end file starts — a cluster with fake nodes (test/support/cluster),
 * a redis-server, the chart installed with `helm install` into fencepost-system (CRD from the chart,
 * Redis fencing backend, two controller replicas with leader election), and a pod runner that runs
 * every fencepost container of every scheduled pod as a local process with that pod's identity
 * (or, with FENCEPOST_E2E_RUNTIME=crun, as a crun container of the image in a sandbox per pod).
 * On failure the controller logs and Events are what to read: dumpDiagnostics prints them.
 */
import { execFile } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, CustomObjectsApi, CoordinationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll } from 'vitest';
import { startCluster, type Cluster } from '../support/cluster/cluster.ts';
import { imageFromEnv, type ImageUnderTest } from '../support/cluster/crun-container.ts';
import { ensureImageRootfs } from '../support/image/archive.ts';
import type { PodRunner, RunningContainer } from '../support/cluster/pod-runner.ts';
import { findBinary } from '../support/testbed/assets.ts';
import { startRedis, type RedisServer } from '../support/testbed/redis.ts';

const run = promisify(execFile);
/** ROOT is the repository. */
export const ROOT = resolve(import.meta.dirname, '../..');
/** RELEASE and SYSTEM_NAMESPACE are where the chart is installed. */
export const RELEASE = 'fencepost';
export const SYSTEM_NAMESPACE = 'fencepost-system';

/**
 * RUNTIME is how the pod runner runs fencepost's containers: FENCEPOST_E2E_RUNTIME=crun runs them
 * as crun containers of the image, each pod in its own rootless sandbox — the unpacked root named
 * by FENCEPOST_IMAGE_ROOTFS (and FENCEPOST_IMAGE_CONFIG), else the archive's (ensureImageRootfs:
 * FENCEPOST_IMAGE_ARCHIVE, or hack/build-image.sh, cached); anything else, as local processes
 * (the fast default).
 */
export const RUNTIME = process.env['FENCEPOST_E2E_RUNTIME'] === 'crun' ? 'crun' : 'process';

/** E2e gives a file its cluster once beforeAll has run. */
export interface E2e {
  readonly cluster: Cluster;
  readonly redis: RedisServer;
  readonly runner: PodRunner;
  readonly kc: KubeConfig;
  readonly core: CoreV1Api;
  readonly leases: CoordinationV1Api;
  readonly custom: CustomObjectsApi;
  readonly kubectl: (args: readonly string[]) => Promise<string>;
  readonly helm: (args: readonly string[]) => Promise<string>;
  /** agentOf is the running fencepost-agent container of a pod, if any. */
  readonly agentOf: (namespace: string, pod: string) => RunningContainer | undefined;
}

/**
 * Published is a release installed the way users install it: the chart from a registry, its pods'
 * images pulled from there by digest (crun, whatever FENCEPOST_E2E_RUNTIME says).
 */
export interface Published {
  /** publish runs before the cluster starts and says what to install (e.g. hack/release.sh into a registry). */
  readonly publish: () => Promise<{ readonly chart: string; readonly version: string }>;
  /** pull resolves a pod's image reference to an unpacked image (test/support/image/archive.ts pullImageRootfs). */
  readonly pull: (reference: string) => ImageUnderTest;
}

/**
 * useE2eCluster registers beforeAll/afterAll: start everything, install the chart with agent
 * RBAC for appNamespaces (created here), and tear it all down after the file. The chart is the
 * repository's charts/fencepost with the image under test, or with `published`, a chart reference
 * and version from a registry, installed with no image values at all.
 */
export function useE2eCluster(
  appNamespaces: readonly string[],
  extraValues: readonly string[] = [],
  published?: Published,
): E2e {
  let e: E2e | undefined;
  let stopAll: () => Promise<void> = () => Promise.resolve();
  beforeAll(async () => {
    const chart = published === undefined ? undefined : await published.publish();
    const runtime = published === undefined ? RUNTIME : 'crun';
    const image =
      runtime === 'crun' && published === undefined ? (imageFromEnv() ?? (await ensureImageRootfs())) : undefined;
    // Say in every run's output what ran fencepost's containers: the closing notes quote it.
    process.stderr.write(
      `[e2e] fencepost's containers: ${published !== undefined ? `crun, images pulled by digest for ${chart?.chart ?? ''} ${chart?.version ?? ''}` : image === undefined ? 'local processes (FENCEPOST_E2E_RUNTIME unset)' : `crun, image root ${image.rootfs}${'digest' in image ? ` (${String(image.digest)})` : ''}`}\n`,
    );
    const [cluster, redis] = await Promise.all([
      startCluster({
        installCrds: false,
        nodes: 2,
        runtime,
        ...(image !== undefined ? { image } : {}),
        ...(published !== undefined ? { pull: published.pull } : {}),
      }),
      startRedis(),
    ]);
    stopAll = async () => {
      await cluster.stop();
      await redis.stop();
    };
    const kubeconfig = cluster.plane.kubeconfigPath;
    const kubectl = async (args: readonly string[]) =>
      (await run(findBinary('kubectl'), ['--kubeconfig', kubeconfig, ...args], { cwd: ROOT, maxBuffer: 16 << 20 }))
        .stdout;
    const helm = async (args: readonly string[]) =>
      (await run(findBinary('helm'), ['--kubeconfig', kubeconfig, ...args], { cwd: ROOT, maxBuffer: 16 << 20 })).stdout;
    for (const ns of appNamespaces) await kubectl(['create', 'namespace', ns]);
    const runner = cluster.runPods('all');
    await helm([
      'install',
      RELEASE,
      ...(chart === undefined
        ? [join(ROOT, 'charts/fencepost'), '--set', 'image.repository=fencepost', '--set', 'image.tag=e2e']
        : [chart.chart, '--version', chart.version]),
      '--namespace',
      SYSTEM_NAMESPACE,
      '--create-namespace',
      '--set',
      'fencing.backend=Redis',
      '--set',
      `fencing.redisUrl=${redis.url}`,
      '--set',
      `agentRbac.namespaces={${appNamespaces.join(',')}}`,
      '--wait',
      '--timeout',
      '120s',
      ...extraValues,
    ]);
    const kc = cluster.plane.kubeConfig();
    e = {
      cluster,
      redis,
      runner,
      kc,
      kubectl,
      helm,
      core: kc.makeApiClient(CoreV1Api),
      leases: kc.makeApiClient(CoordinationV1Api),
      custom: kc.makeApiClient(CustomObjectsApi),
      agentOf: (namespace, pod) =>
        runner
          .containers()
          .find(
            (c) =>
              c.namespace === namespace && c.pod === pod && c.container === 'fencepost-agent' && c.proc.isRunning(),
          ),
    };
  });
  afterAll(async () => {
    await stopAll();
  });
  return new Proxy({} as E2e, {
    get: (_t, key) => {
      if (e === undefined) throw new Error('useE2eCluster: used before beforeAll');
      return e[key as keyof E2e];
    },
  });
}

/** dumpDiagnostics returns the controllers' logs and the Events of a namespace, for failure messages. */
export async function dumpDiagnostics(e: E2e, namespace: string): Promise<string> {
  const dir = join(e.cluster.plane.dir, 'pods');
  const logs = readdirSync(dir)
    .filter((f) => f.startsWith(`${SYSTEM_NAMESPACE}.`) && f.endsWith('.log'))
    .map((f) => `--- ${f}\n${readFileSync(join(dir, f), 'utf8').split('\n').slice(-40).join('\n')}`);
  const events = await e
    .kubectl(['get', 'events', '-n', namespace, '--sort-by=.lastTimestamp'])
    .catch((err: unknown) => String(err));
  return [...logs, `--- events in ${namespace}\n${events}`].join('\n');
}
