/**
 * startCluster: a test control plane plus what makes pods run on it — kube-scheduler,
 * kube-controller-manager, kwok with fake nodes, and the pod runner that runs fencepost containers
 * as local processes with their pods' identities. Deployments create pods that are scheduled,
 * become Running and Ready, roll and get deleted, as on a cluster (docs/testbed.md, "Nodes").
 */
import { join } from 'node:path';
import { startControlPlane, type ControlPlane, type ControlPlaneOptions } from '../testbed/control-plane.ts';
import type { ManagedProcess } from '../testbed/processes.ts';
import { startControllerManager, startKwok, startScheduler } from './components.ts';
import { createNodes, waitNodesReady } from './nodes.ts';
import type { ImageUnderTest } from './crun-container.ts';
import { startPodRunner, type PodRunner, type PodRuntime } from './pod-runner.ts';
import { startNode, type NodeOptions, type RealNode } from '../node/node.ts';

/** ClusterOptions configures startCluster. */
export interface ClusterOptions extends ControlPlaneOptions {
  /** nodes is the number of fake nodes (default 2). */
  readonly nodes?: number;
  /** runNamespaces are the namespaces whose fencepost containers a pod runner runs from the start ('all', a list; default none: see runPods). */
  readonly runNamespaces?: readonly string[] | 'all';
  /** runtime is how pod runners run fencepost's containers (default 'process'; 'crun' needs image). */
  readonly runtime?: PodRuntime;
  /** image is the unpacked fencepost image for crun mode. */
  readonly image?: ImageUnderTest;
  /**
   * realNode replaces kwok's fake nodes with one real node (test/support/node: containerd, runc,
   * CNI and a kubelet) whose image store gets the given archives; pod runners are not for it.
   */
  readonly realNode?: NodeOptions;
  /** nodeMonitorGracePeriod is kube-controller-manager's (default 5m: see components.ts). */
  readonly nodeMonitorGracePeriod?: string;
  /** pull, in crun mode, pulls each pod's fencepost image by its reference (PodRunnerOptions.pull). */
  readonly pull?: (reference: string) => ImageUnderTest;
}

/** Cluster is a running control plane with nodes. */
export interface Cluster {
  readonly plane: ControlPlane;
  readonly nodes: readonly string[];
  readonly components: readonly ManagedProcess[];
  /** node is the real node (realNode), else undefined. */
  readonly node: RealNode | undefined;
  /** runPods starts a pod runner for namespaces (stopped with the cluster). */
  runPods(namespaces: readonly string[] | 'all'): PodRunner;
  stop(): Promise<void>;
}

/** startCluster starts the control plane, the three components and the nodes, and waits until the nodes are Ready. */
export async function startCluster(opts: ClusterOptions = {}): Promise<Cluster> {
  const plane = await startControlPlane({
    ...opts,
    ...(opts.realNode !== undefined ? { serviceAccountAdmission: true } : {}),
  });
  const pidFile = join(plane.dir, 'pids');
  const components: ManagedProcess[] = [];
  const runners: PodRunner[] = [];
  let node: RealNode | undefined;
  const stop = async (): Promise<void> => {
    await Promise.allSettled(runners.map((r) => r.stop()));
    // The node first: its kubelet talks to the API server until the end, and its pods' teardown
    // needs containerd; then the control-plane components.
    const nodeStopped = node?.stop();
    await Promise.allSettled(components.map((c) => c.stop()));
    const [nodeResult] = await Promise.allSettled([nodeStopped]);
    await plane.stop();
    // A node that could not undo a host change says so after everything else has stopped.
    if (nodeResult.status === 'rejected') throw nodeResult.reason;
  };
  try {
    components.push(
      ...(opts.realNode === undefined ? [startKwok(plane, pidFile)] : []),
      startScheduler(plane, pidFile),
      startControllerManager(plane, pidFile, opts.nodeMonitorGracePeriod),
    );
    const admin = plane.kubeConfig();
    let nodes: string[];
    if (opts.realNode !== undefined) {
      node = await startNode(plane, { pidFile, ...opts.realNode });
      nodes = [node.name];
    } else {
      nodes = await createNodes(admin, opts.nodes ?? 2);
      await waitNodesReady(admin, nodes);
    }
    for (const c of components) if (!c.isRunning()) throw new Error(`${c.name} exited: see ${c.logFile}`);
    const cluster: Cluster = {
      plane,
      nodes,
      components,
      node,
      runPods(namespaces) {
        const r = startPodRunner({
          admin: plane.kubeConfig(),
          namespaces,
          dir: join(plane.dir, 'pods'),
          pidFile,
          ...(opts.runtime !== undefined ? { runtime: opts.runtime } : {}),
          ...(opts.image !== undefined ? { image: opts.image } : {}),
          ...(opts.pull !== undefined ? { pull: opts.pull } : {}),
        });
        runners.push(r);
        return r;
      },
      stop,
    };
    if (opts.runNamespaces !== undefined) cluster.runPods(opts.runNamespaces);
    return cluster;
  } catch (err) {
    await stop();
    throw err;
  }
}
