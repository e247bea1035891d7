/**
 * useE2eCluster: what every end-to-end file starts — a cluster with fake nodes (test/support/cluster),
 * a redis-server, the chart installed with `helm install` into fencepost-system (CRD from the chart,
 * Redis fencing backend, two controller replicas with leader election), and a pod runner that runs
 * every fencepost container of every scheduled pod as a local process with that pod's identity
 * (or, with FENCEPOST_E2E_RUNTIME=crun, as a crun container of the image in a sandbox per pod).
 * With FENCEPOST_E2E_RUNTIME=kubelet there are no fake nodes and no pod runner: one real node
 * (test/support/node: kubelet, containerd, runc, CNI) runs every container from the image.
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
import { ensureImageArchive, ensureImageRootfs } from '../support/image/archive.ts';
import { startNode, type RealNode } from '../support/node/node.ts';
import type { PodRunner, RunningContainer } from '../support/cluster/pod-runner.ts';
import { KUBE_VERSION, findBinary } from '../support/testbed/assets.ts';
import { getStatus } from '../support/testbed/http-probe.ts';
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
export const RUNTIME: 'crun' | 'kubelet' | 'process' =
  process.env['FENCEPOST_E2E_RUNTIME'] === 'crun'
    ? 'crun'
    : process.env['FENCEPOST_E2E_RUNTIME'] === 'kubelet'
      ? 'kubelet'
      : 'process';
/** ON_KUBELET says whether the files that prove the kubelet's own behaviour run (they need the real node). */
export const ON_KUBELET = RUNTIME === 'kubelet';
/** IMAGE is the image fencepost's pods name (imported into the real node's store as it). */
export const IMAGE = 'fencepost:e2e';
/** EXAMPLE_IMAGE and EXAMPLE_APP_IMAGE are what examples/ name: the release's image and an application's. */
export const EXAMPLE_IMAGE = 'ghcr.io/fencepost/fencepost:0.1.0';
export const EXAMPLE_APP_IMAGE = 'registry.example.com/singleton-worker:1.0.0';
/**
 * EXAMPLE_CURL_IMAGE is the image of the cron fleet's curl job. No registry serves it here: on the
 * real node it is made of this machine's sh, curl, sed and sleep with their libraries (Debian's,
 * not curl's image), which is all the example's script runs.
 */
export const EXAMPLE_CURL_IMAGE = 'curlimages/curl:8.11.1';
const CURL_IMAGE_BINARIES = ['/bin/sh', '/usr/bin/curl', '/bin/sed', '/bin/sleep'];
/** SPARE_TAINT is the spare node's NoSchedule taint: the chart's pods stay off it; a test's pod tolerates it. */
export const SPARE_TAINT = 'e2e.fencepost.io/spare';

/** E2e gives a file its cluster once beforeAll has run. */
export interface E2e {
  readonly cluster: Cluster;
  readonly redis: RedisServer;
  /** runner is the pod runner (fake nodes only: on the real node using it throws). */
  readonly runner: PodRunner;
  /** node is the real node (FENCEPOST_E2E_RUNTIME=kubelet; using it otherwise throws). */
  readonly node: RealNode;
  /** spare is the second real node (E2eOptions.spareNode; using it otherwise throws). */
  readonly spare: RealNode;
  readonly kc: KubeConfig;
  readonly core: CoreV1Api;
  readonly leases: CoordinationV1Api;
  readonly custom: CustomObjectsApi;
  readonly kubectl: (args: readonly string[]) => Promise<string>;
  readonly helm: (args: readonly string[]) => Promise<string>;
  /** agentOf is the running fencepost-agent container of a pod, if any (pod runner only). */
  readonly agentOf: (namespace: string, pod: string) => RunningContainer | undefined;
  /**
   * running lists the pods of a namespace whose container (or native sidecar) is running now:
   * the pod runner's, or on the real node the pod status the kubelet reports.
   */
  readonly running: (namespace: string, container: string) => Promise<string[]>;
  /**
   * podGet asks a container's port over HTTP as a neighbour in its pod would (the agent's API
   * listens on the pod's loopback): through the pod runner's port map, or on the real node
   * inside the pod's network namespace. Status 0 when nothing answered.
   */
  readonly podGet: (
    namespace: string,
    pod: string,
    container: string,
    port: number,
    path: string,
  ) => Promise<{ status: number; body: string }>;
}

/**
 * Published is a release installed the way users install it: the chart from a registry, its pods'
 * images pulled from there by digest. With FENCEPOST_E2E_RUNTIME=kubelet the real node's kubelet
 * pulls them (containerd's CRI pull, the registry configured as plain HTTP); otherwise the pod
 * runner pulls them and runs them under crun.
 */
export interface Published {
  /**
   * publish runs before the cluster starts and says what to install (e.g. hack/release.sh into a
   * registry) and from which registry host ("127.0.0.1:PORT", plain HTTP) the node pulls.
   */
  readonly publish: () => Promise<{ readonly chart: string; readonly version: string; readonly registry: string }>;
  /** pull resolves a pod's image reference to an unpacked image for crun (test/support/image/archive.ts pullImageRootfs). */
  readonly pull: (reference: string) => ImageUnderTest;
}

/** E2eOptions: what a test file changes of the cluster. */
export interface E2eOptions {
  /** nodeMonitorGracePeriod is kube-controller-manager's, on the real node (default 5m). */
  readonly nodeMonitorGracePeriod?: string;
  /** published installs a release from a registry instead of the repository's chart (kubelet or crun). */
  readonly published?: Published;
  /**
   * spareNode adds a second real node on this host (FENCEPOST_E2E_RUNTIME=kubelet): its own
   * containerd, kubelet, folder, bridge, pod subnet and cgroup root, registered with the
   * SPARE_TAINT so that the chart's pods (controller, dashboard) stay on the first — a test may
   * lose it without losing the controller.
   */
  readonly spareNode?: boolean;
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
  options: E2eOptions = {},
): E2e {
  let e: E2e | undefined;
  let stopAll: () => Promise<void> = () => Promise.resolve();
  beforeAll(async () => {
    const { nodeMonitorGracePeriod, published } = options;
    const chart = published === undefined ? undefined : await published.publish();
    // A published release runs on the real node or under crun, never as local processes: what runs is the pulled image.
    const runtime = published === undefined || RUNTIME === 'kubelet' ? RUNTIME : 'crun';
    const image =
      runtime === 'crun' && published === undefined ? (imageFromEnv() ?? (await ensureImageRootfs())) : undefined;
    // The real node's binaries (kubelet, containerd, runc, CNI, crictl, pause): built once into the
    // testbed's cache, where findBinary looks; cached, this takes a second.
    if (runtime === 'kubelet')
      await run(join(ROOT, 'hack/testbed/build.sh'), ['node'], { cwd: ROOT, maxBuffer: 16 << 20 });
    // A published release's image comes from its registry: nothing of fencepost's is imported then.
    const archive = runtime === 'kubelet' && published === undefined ? ensureImageArchive() : undefined;
    // Say in every run's output what ran fencepost's containers: the closing notes quote it.
    process.stderr.write(
      `[e2e] fencepost's containers: ${
        published !== undefined
          ? `${runtime === 'kubelet' ? `kubelet ${KUBE_VERSION} + containerd + runc on a real node` : 'crun'}, images pulled by digest from ${chart?.registry ?? ''} for ${chart?.chart ?? ''} ${chart?.version ?? ''}`
          : archive !== undefined
            ? `kubelet ${KUBE_VERSION} + containerd + runc on a real node, image ${IMAGE} imported from ${archive}`
            : image === undefined
              ? 'local processes (FENCEPOST_E2E_RUNTIME unset)'
              : `crun, image root ${image.rootfs}${'digest' in image ? ` (${String(image.digest)})` : ''}`
      }\n`,
    );
    const [cluster, redis] = await Promise.all([
      startCluster({
        installCrds: false,
        nodes: 2,
        ...(runtime === 'kubelet' ? {} : { runtime }),
        ...(image !== undefined ? { image } : {}),
        ...(published !== undefined && runtime !== 'kubelet' ? { pull: published.pull } : {}),
        ...(runtime === 'kubelet'
          ? {
              realNode: {
                // The image under the tests' name and the examples' (the release's), or none: a
                // published release's image is the kubelet's to pull from the registry. The pause
                // image stands in for the examples' application, as in hack/e2e-kind.sh.
                images: archive === undefined ? [] : [{ archive, names: [IMAGE, EXAMPLE_IMAGE] }],
                ...(chart !== undefined ? { plainHttpRegistries: [chart.registry] } : {}),
                pauseAs: [EXAMPLE_APP_IMAGE],
                hostImages: [{ names: [EXAMPLE_CURL_IMAGE], binaries: CURL_IMAGE_BINARIES }],
              },
              nodeMonitorGracePeriod: nodeMonitorGracePeriod ?? '5m',
            }
          : {}),
      }),
      startRedis(),
    ]);
    const node = cluster.node;
    stopAll = async () => {
      await cluster.stop();
      await redis.stop();
    };
    // The spare node after the first and stopped before it: its ledger snapshots the host with the
    // first node's changes in, so undoing it leaves the first node's for the first node to undo.
    let spare: RealNode | undefined;
    if (options.spareNode === true && node !== undefined && archive !== undefined) {
      spare = await startNode(cluster.plane, {
        name: 'fencepost-node-2',
        folder: 'node-2',
        pidFile: join(cluster.plane.dir, 'pids'),
        images: [{ archive, names: [IMAGE, EXAMPLE_IMAGE] }],
        pauseAs: [EXAMPLE_APP_IMAGE],
        taints: [{ key: SPARE_TAINT, effect: 'NoSchedule' }],
      }).catch(async (err: unknown) => {
        await stopAll();
        throw err;
      });
      const stopFirst = stopAll;
      const second = spare;
      stopAll = async () => {
        const [r] = await Promise.allSettled([second.stop()]);
        await stopFirst();
        if (r.status === 'rejected') throw r.reason;
      };
    }
    const kubeconfig = cluster.plane.kubeconfigPath;
    const kubectl = async (args: readonly string[]) =>
      (await run(findBinary('kubectl'), ['--kubeconfig', kubeconfig, ...args], { cwd: ROOT, maxBuffer: 16 << 20 }))
        .stdout;
    const helm = async (args: readonly string[]) =>
      (await run(findBinary('helm'), ['--kubeconfig', kubeconfig, ...args], { cwd: ROOT, maxBuffer: 16 << 20 })).stdout;
    for (const ns of appNamespaces) await kubectl(['create', 'namespace', ns]);
    const runner = node === undefined ? cluster.runPods('all') : undefined;
    const kc = cluster.plane.kubeConfig();
    // On the real node the controller reaches the test's Redis through the node's bridge.
    const redisUrl = node === undefined ? redis.url : `redis://${node.exposeLoopback(redis.port)}`;
    await helm([
      'install',
      RELEASE,
      ...(chart === undefined
        ? [
            join(ROOT, 'charts/fencepost'),
            '--set',
            'image.repository=fencepost',
            '--set',
            'image.tag=e2e',
            '--set',
            'image.pullPolicy=IfNotPresent',
          ]
        : [chart.chart, '--version', chart.version]),
      '--namespace',
      SYSTEM_NAMESPACE,
      '--create-namespace',
      '--set',
      'fencing.backend=Redis',
      '--set',
      `fencing.redisUrl=${redisUrl}`,
      '--set',
      `agentRbac.namespaces={${appNamespaces.join(',')}}`,
      '--wait',
      '--timeout',
      '120s',
      ...extraValues,
    ]);
    // What runs the chart's pods, for the record: the runtime's own list of containers and images.
    if (node !== undefined) process.stderr.write(`[e2e] crictl ps after helm install:\n${node.crictl(['ps'])}`);
    const only = <T>(what: string, v: T | undefined): T => {
      if (v === undefined) throw new Error(`e2e: no ${what} with FENCEPOST_E2E_RUNTIME=${RUNTIME}`);
      return v;
    };
    e = {
      cluster,
      redis,
      get runner() {
        return only('pod runner', runner);
      },
      get node() {
        return only('real node', node);
      },
      get spare() {
        return only('spare real node', spare);
      },
      kc,
      kubectl,
      helm,
      core: kc.makeApiClient(CoreV1Api),
      leases: kc.makeApiClient(CoordinationV1Api),
      custom: kc.makeApiClient(CustomObjectsApi),
      running: async (namespace, container) => {
        if (runner !== undefined)
          return runner
            .running()
            .filter((c) => c.namespace === namespace && c.container === container)
            .map((c) => c.pod);
        const pods = await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace });
        return pods.items
          .filter((p) =>
            [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])].some(
              (c) => c.name === container && c.state?.running !== undefined,
            ),
          )
          .map((p) => p.metadata?.name ?? '');
      },
      podGet: async (namespace, pod, container, port, path) => {
        if (node !== undefined) {
          const url = `http://127.0.0.1:${port}${path}`;
          const r = await node.podGet(namespace, pod, url);
          return r.status === 0 && spare !== undefined ? spare.podGet(namespace, pod, url) : r;
        }
        const c = only('pod runner', runner)
          .containers()
          .find((x) => x.namespace === namespace && x.pod === pod && x.container === container && x.proc.isRunning());
        const local = c?.ports.get(port);
        if (local === undefined) return { status: 0, body: `no running ${container} in ${namespace}/${pod}` };
        return getStatus(`http://127.0.0.1:${local}${path}`, undefined, 1000).catch((err: unknown) => ({
          status: 0,
          body: String(err),
        }));
      },
      agentOf: (namespace, pod) =>
        only('pod runner', runner)
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
  const dir = e.cluster.node === undefined ? join(e.cluster.plane.dir, 'pods') : join(e.cluster.node.dir, 'pod-logs');
  // The pod runner's logs are files named <namespace>.<pod>…log; the kubelet's, folders
  // <namespace>_<pod>_<uid>/<container>/<restart>.log.
  const logs = (readdirSync(dir, { recursive: true }) as string[])
    .filter((f) => f.startsWith(`${SYSTEM_NAMESPACE}${e.cluster.node === undefined ? '.' : '_'}`) && f.endsWith('.log'))
    .map((f) => `--- ${f}\n${readFileSync(join(dir, f), 'utf8').split('\n').slice(-40).join('\n')}`);
  const events = await e
    .kubectl(['get', 'events', '-n', namespace, '--sort-by=.lastTimestamp'])
    .catch((err: unknown) => String(err));
  return [...logs, `--- events in ${namespace}\n${events}`].join('\n');
}
