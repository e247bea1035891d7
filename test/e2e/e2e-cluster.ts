/**
 * The e2e files' clusters (the boot itself is cluster-boot.ts): useSharedE2eCluster gives a
 * default-tier file the run's one cluster, useE2eCluster boots one for a file that needs its own
 * (a published release, a spare node). On failure the controller logs and Events are what to
 * read: dumpDiagnostics prints them.
 */
import { execFile } from 'node:child_process';
import { request } from 'node:http';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, CustomObjectsApi, CoordinationV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, inject } from 'vitest';
import { attachNode, type NodeProbes, type RealNode } from '../support/node/node.ts';
import type { PodRunner, RunningContainer } from '../support/cluster/pod-runner.ts';
import { findBinary } from '../support/testbed/assets.ts';
import { getStatus } from '../support/testbed/http-probe.ts';
import {
  ROOT,
  RUNTIME,
  SHARED_NAMESPACES,
  SHARED_VALUES,
  SYSTEM_NAMESPACE,
  bootE2eCluster,
  type ClusterFacts,
  type E2eOptions,
} from './cluster-boot.ts';

export {
  EXAMPLE_APP_IMAGE,
  EXAMPLE_CURL_IMAGE,
  EXAMPLE_IMAGE,
  IMAGE,
  ON_KUBELET,
  RELEASE,
  ROOT,
  RUNTIME,
  SPARE_TAINT,
  SYSTEM_NAMESPACE,
  type ClusterFacts,
  type E2eOptions,
  type Published,
} from './cluster-boot.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** e2eSharedCluster is where test/e2e/shared-cluster.ts answers with the run's cluster's facts (loopback HTTP). */
    e2eSharedCluster: string;
  }
}

const run = promisify(execFile);

/**
 * E2e gives a file its cluster once beforeAll has run. N is what it may ask of the real node: the
 * node in full when the file booted its cluster (useE2eCluster), its runtime's probes when the file
 * shares the run's (useSharedE2eCluster: the node is another process's).
 */
export interface E2e<N extends NodeProbes = NodeProbes> {
  /** facts are the cluster's kubeconfig, folders and node names. */
  readonly facts: ClusterFacts;
  /** runner is the pod runner (fake nodes only: on the real node using it throws). */
  readonly runner: PodRunner;
  /** node is the real node (FENCEPOST_E2E_RUNTIME=kubelet; using it otherwise throws). */
  readonly node: N;
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
 * useE2eCluster registers beforeAll/afterAll: boot a cluster for this file alone (bootE2eCluster:
 * agent RBAC for appNamespaces, which it creates, and extraValues), and tear it all down after
 * the file. For a file that needs a cluster of its own (options: a published release, a spare
 * node, kube-controller-manager's grace period); the others share the run's (useSharedE2eCluster).
 */
export function useE2eCluster(
  appNamespaces: readonly string[],
  extraValues: readonly string[] = [],
  options: E2eOptions = {},
): E2e<RealNode> {
  let e: E2e<RealNode> | undefined;
  let stop: () => Promise<void> = () => Promise.resolve();
  beforeAll(async () => {
    const booted = await bootE2eCluster(appNamespaces, extraValues, options);
    stop = booted.stop;
    e = e2eHandle(booted.facts, booted.cluster.node, booted.runner, booted.spare);
  });
  afterAll(async () => {
    await stop();
  });
  return lazy(() => e);
}

/**
 * useSharedE2eCluster gives a file the run's one cluster (SHARED_NAMESPACES, SHARED_VALUES), booted
 * on the first file's request by test/e2e/shared-cluster.ts in vitest's main process and stopped
 * there when the run ends; after the file its namespace is deleted (what it made goes with it).
 * Only the real node's cluster is shared: under the pod runner (FENCEPOST_E2E_RUNTIME unset or
 * crun) fencepost's containers are child processes of the runner and the tests read its process
 * table and port map, which live in the process that started it, so there each file boots its own
 * with the same values (a few seconds: no node to boot, no image to import).
 */
export function useSharedE2eCluster(namespace: string): E2e {
  if (!SHARED_NAMESPACES.includes(namespace))
    throw new Error(
      `useSharedE2eCluster: namespace "${namespace}" is not one of SHARED_NAMESPACES (${SHARED_NAMESPACES.join(', ')}) in test/e2e/cluster-boot.ts`,
    );
  if (RUNTIME !== 'kubelet') return useE2eCluster([namespace], SHARED_VALUES);
  let e: E2e | undefined;
  beforeAll(async () => {
    const facts = await sharedFacts(inject('e2eSharedCluster'));
    const node = facts.node === undefined ? undefined : attachNode(facts.node.name, facts.node.dir, pidFileOf(facts));
    e = e2eHandle(facts, node, undefined, undefined);
  });
  afterAll(async () => {
    // Not waiting for it: the pods' graceful ends overlap the next file instead of delaying it.
    await e?.kubectl(['delete', 'namespace', namespace, '--wait=false']);
  });
  return lazy(() => e);
}

/** sharedFacts asks test/e2e/shared-cluster.ts for the run's cluster (it boots it on the first request). */
function sharedFacts(url: string): Promise<ClusterFacts> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        if (res.statusCode === 200) resolve(JSON.parse(body) as ClusterFacts);
        else reject(new Error(`the run's shared e2e cluster did not start:\n${body}`));
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** pidFileOf is where a cluster's processes are recorded (test/support/cluster: <plane>/pids). */
function pidFileOf(facts: ClusterFacts): string {
  return join(facts.planeDir, 'pids');
}

/** lazy is a file's E2e before beforeAll has made it: using it then throws. */
function lazy<T extends object>(get: () => T | undefined): T {
  return new Proxy({} as T, {
    get: (_t, key) => {
      const e = get();
      if (e === undefined) throw new Error('e2e cluster: used before beforeAll');
      return e[key as keyof T];
    },
  });
}

/** e2eHandle is a file's E2e for a booted cluster: the node and runner are this process's, if any. */
function e2eHandle<N extends NodeProbes>(
  facts: ClusterFacts,
  node: N | undefined,
  runner: PodRunner | undefined,
  spare: RealNode | undefined,
): E2e<N> {
  const kubeconfig = facts.kubeconfigPath;
  const kubectl = async (args: readonly string[]) =>
    (await run(findBinary('kubectl'), ['--kubeconfig', kubeconfig, ...args], { cwd: ROOT, maxBuffer: 16 << 20 }))
      .stdout;
  const helm = async (args: readonly string[]) =>
    (await run(findBinary('helm'), ['--kubeconfig', kubeconfig, ...args], { cwd: ROOT, maxBuffer: 16 << 20 })).stdout;
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const only = <T>(what: string, v: T | undefined): T => {
    if (v === undefined) throw new Error(`e2e: no ${what} with FENCEPOST_E2E_RUNTIME=${RUNTIME}`);
    return v;
  };
  return {
    facts,
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
          (c) => c.namespace === namespace && c.pod === pod && c.container === 'fencepost-agent' && c.proc.isRunning(),
        ),
  };
}

/** dumpDiagnostics returns the controllers' logs and the Events of a namespace, for failure messages. */
export async function dumpDiagnostics(e: E2e, namespace: string): Promise<string> {
  const node = e.facts.node;
  const dir = node === undefined ? join(e.facts.planeDir, 'pods') : join(node.dir, 'pod-logs');
  // The pod runner's logs are files named <namespace>.<pod>…log; the kubelet's, folders
  // <namespace>_<pod>_<uid>/<container>/<restart>.log.
  const logs = (readdirSync(dir, { recursive: true }) as string[])
    .filter((f) => f.startsWith(`${SYSTEM_NAMESPACE}${node === undefined ? '.' : '_'}`) && f.endsWith('.log'))
    .map((f) => `--- ${f}\n${readFileSync(join(dir, f), 'utf8').split('\n').slice(-40).join('\n')}`);
  const events = await e
    .kubectl(['get', 'events', '-n', namespace, '--sort-by=.lastTimestamp'])
    .catch((err: unknown) => String(err));
  return [...logs, `--- events in ${namespace}\n${events}`].join('\n');
}
