/**
 * bootE2eCluster: what every end-to-end run starts — a cluster with fake nodes (test/support/cluster),
 * a redis-server, the chart installed with `helm install` into fencepost-system (CRD from the chart,
 * Redis fencing backend, two controller replicas with leader election), and a pod runner that runs
 * every fencepost container of every scheduled pod as a local process with that pod's identity
 * (or, with FENCEPOST_E2E_RUNTIME=crun, as a crun container of the image in a sandbox per pod).
 * With FENCEPOST_E2E_RUNTIME=kubelet there are no fake nodes and no pod runner: one real node
 * (test/support/node: kubelet, containerd, runc, CNI) runs every container from the image.
 *
 * One boot for both uses: the cluster the default-tier files share (booted once per vitest run by
 * test/e2e/shared-cluster.ts, in vitest's main process) and the cluster a file boots for itself
 * (useE2eCluster in e2e-cluster.ts: the release test's published install, node-loss's spare node).
 * No vitest import here: the main process loads this module outside any test.
 */
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { startCluster, type Cluster } from '../support/cluster/cluster.ts';
import { imageFromEnv, type ImageUnderTest } from '../support/cluster/crun-container.ts';
import { ensureImageArchive, ensureImageRootfs } from '../support/image/archive.ts';
import { startNode, type RealNode } from '../support/node/node.ts';
import type { PodRunner } from '../support/cluster/pod-runner.ts';
import { KUBE_VERSION, findBinary } from '../support/testbed/assets.ts';
import { startRedis } from '../support/testbed/redis.ts';

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
 * SHARED_NAMESPACES are the application namespaces of the files that share the run's cluster
 * (useSharedE2eCluster): created before `helm install`, which gives each the agents' RBAC.
 */
export const SHARED_NAMESPACES: readonly string[] = ['e2e-cron', 'e2e-sidecar', 'e2e-sidecar-ports', 'e2e-singleton'];

/**
 * SHARED_VALUES are the chart values of every shared-cluster file's install: the chart's dashboard
 * too, serving its Service (0.0.0.0 and allowRemote: under crun a pod's loopback is out of the
 * test's reach; the process runner moves it to a loopback port anyway), and the controllers'
 * metrics over plain HTTP, as podGet speaks it as a neighbour in the pod (the secure listener —
 * HTTPS, TokenReview and SubjectAccessReview — is covered by
 * test/integration/controller/metrics-auth.test.ts and by the chart's install test). The files
 * that do not read them are indifferent to them: their pods are in their own namespaces.
 */
export const SHARED_VALUES: readonly string[] = [
  '--set',
  'dashboard.enabled=true',
  '--set',
  'dashboard.address=0.0.0.0:8300',
  '--set',
  'dashboard.allowRemote=true',
  '--set',
  'metrics.secure=false',
];

/**
 * ClusterFacts is what a file needs to reach a booted cluster: plain data, so that the shared
 * cluster's facts cross from vitest's main process to the test files' process.
 */
export interface ClusterFacts {
  /** runtime is what ran fencepost's containers (a published release runs under crun, not as processes). */
  readonly runtime: 'crun' | 'kubelet' | 'process';
  readonly kubeconfigPath: string;
  /** planeDir is the control plane's folder: its pids file, the pod runner's logs (pods/). */
  readonly planeDir: string;
  readonly nodes: readonly string[];
  /** node is the real node's name and folder (kubelet runtime). */
  readonly node?: { readonly name: string; readonly dir: string };
}

/** Booted is a running cluster and what only the process that booted it holds. */
export interface Booted {
  readonly facts: ClusterFacts;
  readonly cluster: Cluster;
  readonly runner: PodRunner | undefined;
  readonly spare: RealNode | undefined;
  /** stop stops everything the boot started, by PID, and undoes the nodes' host changes. */
  readonly stop: () => Promise<void>;
}

/**
 * bootE2eCluster starts everything and installs the chart with agent RBAC for appNamespaces
 * (created here) and extraValues. The chart is the repository's charts/fencepost with the image
 * under test, or with `published`, a chart reference and version from a registry, installed with
 * no image values at all. On failure what it started is stopped before the error is thrown.
 */
export async function bootE2eCluster(
  appNamespaces: readonly string[],
  extraValues: readonly string[] = [],
  options: E2eOptions = {},
): Promise<Booted> {
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
  let stopAll = async (): Promise<void> => {
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
  try {
    for (const ns of appNamespaces) await kubectl(['create', 'namespace', ns]);
    const runner = node === undefined ? cluster.runPods('all') : undefined;
    // On the real node the controller reaches the test's Redis through the node's bridge.
    const redisUrl = node === undefined ? redis.url : `redis://${node.exposeLoopback(redis.port)}`;
    await run(
      findBinary('helm'),
      [
        '--kubeconfig',
        kubeconfig,
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
      ],
      { cwd: ROOT, maxBuffer: 16 << 20 },
    );
    // What runs the chart's pods, for the record: the runtime's own list of containers and images.
    if (node !== undefined) process.stderr.write(`[e2e] crictl ps after helm install:\n${node.crictl(['ps'])}`);
    return {
      facts: {
        runtime,
        kubeconfigPath: kubeconfig,
        planeDir: cluster.plane.dir,
        nodes: cluster.nodes,
        ...(node !== undefined ? { node: { name: node.name, dir: node.dir } } : {}),
      },
      cluster,
      runner,
      spare,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll().catch(() => undefined);
    throw err;
  }
}
