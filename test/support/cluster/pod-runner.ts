/**
 * PodRunner: the kubelet's part for fencepost containers, on a cluster whose nodes are kwok's fakes.
 * kwok marks scheduled pods Running and Ready but runs nothing; the runner starts each container of
 * such a pod whose image is fencepost's (the agent sidecar, `fencepost exec`, the controller) as a
 * local process, with that pod's identity:
 *
 * - a ServiceAccount token bound to the pod (TokenRequest with boundObjectRef), for the pod's
 *   serviceAccountName, in a kubeconfig given as KUBECONFIG — the permissions are the pod's own;
 * - the container's env resolved as the kubelet does (value, fieldRef, secretKeyRef) and `$(VAR)`
 *   in args expanded;
 * - listen addresses in args (`--listen`, `--*-bind-address`, and the agent's default port) moved
 *   to free loopback ports, recorded by the container port they stand for.
 *
 * When the pod is deleted (deletionTimestamp) its processes get SIGTERM and, after the pod's grace
 * period, SIGKILL; once they have exited the pod object is deleted (kwok's pod-delete stage does
 * it for pods without fencepost containers). A process that exits by itself is restarted after a second when the pod's
 * restartPolicy is Always; otherwise, once every fencepost container of the pod has exited, the pod
 * status is written Succeeded or Failed with the exit codes, so Jobs complete as they would.
 * Other containers (the application images of examples) are not run.
 */
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, type KubeConfig, type V1Container, type V1EnvVar, type V1Pod } from '@kubernetes/client-node';
import { freePort } from '../testbed/ports.ts';
import { spawnManaged, type ManagedProcess } from '../testbed/processes.ts';
import { writeServiceAccountKubeconfig } from './identity.ts';

/** FENCEPOST_MAIN is the command-line entry point run for fencepost containers (the image's ENTRYPOINT). */
export const FENCEPOST_MAIN = resolve(import.meta.dirname, '../../../src/cli/main.ts');

/** DEFAULT_PORTS are the listen flags a fencepost command has by default, with the port each stands for. */
const DEFAULT_PORTS: Readonly<Record<string, readonly (readonly [flag: string, port: number])[]>> = {
  agent: [['--listen', 7370]],
  controller: [['--metrics-bind-address', 8080], ['--health-probe-bind-address', 8081]],
};
const ADDRESS_FLAG = /^(--listen|--[a-z-]*bind-address)$/;

/** isFencepostImage: the image's repository is `fencepost` or ends in `/fencepost`. */
export function isFencepostImage(image: string | undefined): boolean {
  const repo = (image ?? '').replace(/@.*$/, '').replace(/:[^/:]*$/, '');
  return repo === 'fencepost' || repo.endsWith('/fencepost');
}

/** expandVars replaces `$(NAME)` with env values as the kubelet does (`$$(X)` stays `$(X)`; unknown names stay). */
export function expandVars(text: string, env: Readonly<Record<string, string>>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (m, name: string | undefined) => (m === '$$' ? '$' : env[name ?? ''] ?? m));
}

/**
 * rewriteAddresses moves every listen address in args to a free loopback port (adding the
 * command's default listen flags that are absent) and returns the new args and, for each original
 * port, the local one.
 */
export async function rewriteAddresses(args: readonly string[], next: () => Promise<number> = freePort): Promise<{ args: string[]; ports: Map<number, number> }> {
  const out: string[] = [];
  const ports = new Map<number, number>();
  const seen = new Set<string>();
  const move = async (address: string): Promise<string> => {
    const port = Number(/:(\d+)$/.exec(address)?.[1] ?? NaN);
    if (!Number.isInteger(port) || port === 0) return address; // "0" disables a listener: keep it
    const local = await next();
    ports.set(port, local);
    return `127.0.0.1:${local}`;
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i] ?? '';
    const eq = a.indexOf('=');
    const flag = eq > 0 ? a.slice(0, eq) : a;
    if (ADDRESS_FLAG.test(flag)) {
      seen.add(flag);
      if (eq > 0) { out.push(`${flag}=${await move(a.slice(eq + 1))}`); continue; }
      const value = args[i + 1];
      if (value !== undefined) { out.push(flag, await move(value)); i++; continue; }
    }
    out.push(a);
  }
  for (const [flag, port] of DEFAULT_PORTS[args[0] ?? ''] ?? []) {
    if (!seen.has(flag)) out.push(`${flag}=${await move(`0.0.0.0:${port}`)}`);
  }
  return { args: out, ports };
}

/** RunningContainer is one fencepost container of a pod, run as a local process. */
export interface RunningContainer {
  readonly namespace: string;
  readonly pod: string;
  readonly uid: string;
  readonly container: string;
  /** ports maps each container port the process listens for to its local loopback port. */
  readonly ports: ReadonlyMap<number, number>;
  readonly logFile: string;
  /** proc is the current process (a new one after a restart). */
  proc: ManagedProcess;
  /** exitCode is the last exit (number or signal name), once the process has ended. */
  exitCode: number | string | undefined;
  restarts: number;
}

/** PodRunnerOptions configures startPodRunner. */
export interface PodRunnerOptions {
  /** admin is an admin KubeConfig (pod reads, TokenRequests, Secret reads, pod status writes). */
  readonly admin: KubeConfig;
  /** namespaces whose pods to run; 'all' for every namespace. */
  readonly namespaces: readonly string[] | 'all';
  /** dir keeps the kubeconfigs and the containers' logs. */
  readonly dir: string;
  readonly pollMs?: number;
}

/** PodRunner is running. */
export interface PodRunner {
  /** containers lists every container the runner has started (all namespaces), the newest last. */
  containers(): readonly RunningContainer[];
  /** running lists the containers whose process runs now. */
  running(): readonly RunningContainer[];
  /** stop ends every process (SIGTERM, then SIGKILL) and the poll loop. */
  stop(): Promise<void>;
}

interface PodState { readonly containers: RunningContainer[]; terminating: boolean; reported: boolean }

/** startPodRunner polls the namespaces' pods and runs their fencepost containers until stop(). */
export function startPodRunner(o: PodRunnerOptions): PodRunner {
  const core = o.admin.makeApiClient(CoreV1Api);
  const pods = new Map<string, PodState>(); // by pod UID
  const all: RunningContainer[] = [];
  let stopped = false;
  mkdirSync(o.dir, { recursive: true });

  const kubeconfigFor = (pod: V1Pod): Promise<string> => writeServiceAccountKubeconfig(
    o.admin, pod.metadata?.namespace ?? '', pod.spec?.serviceAccountName ?? 'default',
    join(o.dir, `${pod.metadata?.namespace ?? ''}.${pod.metadata?.name ?? ''}.kubeconfig`),
    { name: pod.metadata?.name ?? '', uid: pod.metadata?.uid ?? '' },
  );

  const fieldValue = (pod: V1Pod, path: string): string => {
    const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
    if (m !== null) return (m[1] === 'labels' ? pod.metadata?.labels : pod.metadata?.annotations)?.[m[2] ?? ''] ?? '';
    switch (path) {
      case 'metadata.name': return pod.metadata?.name ?? '';
      case 'metadata.namespace': return pod.metadata?.namespace ?? '';
      case 'metadata.uid': return pod.metadata?.uid ?? '';
      case 'spec.nodeName': return pod.spec?.nodeName ?? '';
      case 'spec.serviceAccountName': return pod.spec?.serviceAccountName ?? '';
      case 'status.podIP': return pod.status?.podIP ?? '';
      default: throw new Error(`pod runner: fieldRef ${path} not supported`);
    }
  };

  const resolveEnv = async (pod: V1Pod, vars: readonly V1EnvVar[]): Promise<Record<string, string>> => {
    const env: Record<string, string> = {};
    for (const v of vars) {
      if (v.value !== undefined) env[v.name] = expandVars(v.value, env);
      else if (v.valueFrom?.fieldRef !== undefined) env[v.name] = fieldValue(pod, v.valueFrom.fieldRef.fieldPath);
      else if (v.valueFrom?.secretKeyRef !== undefined) {
        const ref = v.valueFrom.secretKeyRef;
        const secret = await core.readNamespacedSecret({ namespace: pod.metadata?.namespace ?? '', name: ref.name ?? '' });
        const data = secret.data?.[ref.key];
        if (data !== undefined) env[v.name] = Buffer.from(data, 'base64').toString('utf8');
        else if (ref.optional !== true) throw new Error(`secret ${ref.name ?? ''} has no key ${ref.key}`);
      } else env[v.name] = '';
    }
    return env;
  };

  const startContainer = async (pod: V1Pod, c: V1Container, kubeconfig: string, restartOf?: RunningContainer): Promise<RunningContainer> => {
    const ns = pod.metadata?.namespace ?? '';
    const name = pod.metadata?.name ?? '';
    const env = await resolveEnv(pod, c.env ?? []);
    const expanded = [...(c.command ?? []).slice(1), ...(c.args ?? [])].map((a) => expandVars(a, env));
    // A restarted container listens on the same local ports as before (they are what tests know).
    const previous = restartOf !== undefined ? [...restartOf.ports.values()] : [];
    const { args, ports } = await rewriteAddresses(expanded, async () => previous.shift() ?? await freePort());
    const logFile = join(o.dir, `${ns}.${name}.${c.name}.log`);
    const proc = spawnManaged(`${name}/${c.name}`, process.execPath, {
      args: [FENCEPOST_MAIN, ...args], logFile,
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: process.env['HOME'] ?? '/tmp', ...env, KUBECONFIG: kubeconfig },
    });
    const rc: RunningContainer = restartOf ?? { namespace: ns, pod: name, uid: pod.metadata?.uid ?? '', container: c.name, ports: new Map(ports), logFile, proc, exitCode: undefined, restarts: 0 };
    rc.proc = proc;
    rc.exitCode = undefined;
    if (restartOf === undefined) all.push(rc);
    void proc.exited.then((code) => { rc.exitCode = code; });
    return rc;
  };

  const fencepostContainers = (pod: V1Pod): V1Container[] => [
    ...(pod.spec?.initContainers ?? []).filter((c) => c.restartPolicy === 'Always'),
    ...(pod.spec?.containers ?? []),
  ].filter((c) => isFencepostImage(c.image));

  const reportExit = async (pod: V1Pod, state: PodState): Promise<void> => {
    const codes = state.containers.map((c) => (typeof c.exitCode === 'number' ? c.exitCode : 137));
    const now = new Date();
    const fresh = await core.readNamespacedPod({ namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '' });
    fresh.status = {
      ...fresh.status,
      phase: codes.every((c) => c === 0) ? 'Succeeded' : 'Failed',
      conditions: [{ type: 'Ready', status: 'False', lastTransitionTime: now, reason: 'PodCompleted' }],
      containerStatuses: (fresh.spec?.containers ?? []).map((c) => {
        const rc = state.containers.find((r) => r.container === c.name);
        const exitCode = rc !== undefined && typeof rc.exitCode === 'number' ? rc.exitCode : 0;
        return { name: c.name, image: c.image ?? '', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode, reason: exitCode === 0 ? 'Completed' : 'Error', startedAt: now, finishedAt: now } } };
      }),
    };
    await core.replaceNamespacedPodStatus({ namespace: fresh.metadata?.namespace ?? '', name: fresh.metadata?.name ?? '', body: fresh });
  };

  /**
   * terminate stops a deleted pod's processes (SIGTERM, SIGKILL after the grace period) and then,
   * as the kubelet does once the containers are gone, deletes the pod object with grace 0.
   */
  const terminate = (pod: V1Pod | undefined, state: PodState): void => {
    state.terminating = true;
    const graceMs = Math.min(30, pod?.metadata?.deletionGracePeriodSeconds ?? pod?.spec?.terminationGracePeriodSeconds ?? 30) * 1000;
    void Promise.all(state.containers.map((c) => c.proc.stop(graceMs))).then(async () => {
      if (pod === undefined || stopped) return;
      await core.deleteNamespacedPod({ namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '', gracePeriodSeconds: 0, body: { preconditions: { uid: pod.metadata?.uid ?? '' } } }).catch(() => undefined);
    });
  };

  /** syncPod starts, restarts, reports or stops one pod's fencepost containers. */
  const syncPod = async (pod: V1Pod): Promise<void> => {
    const uid = pod.metadata?.uid ?? '';
    const state = pods.get(uid);
    if (state === undefined) {
      const running = pod.status?.phase === 'Running' && (pod.spec?.nodeName ?? '') !== '' && pod.metadata?.deletionTimestamp === undefined;
      const wanted = fencepostContainers(pod);
      if (!running || wanted.length === 0) return;
      const kubeconfig = await kubeconfigFor(pod); // throws before anything started: retried next round
      const fresh: PodState = { containers: [], terminating: false, reported: false };
      pods.set(uid, fresh);
      for (const c of wanted) fresh.containers.push(await startContainer(pod, c, kubeconfig));
      return;
    }
    if (pod.metadata?.deletionTimestamp !== undefined) {
      if (!state.terminating) terminate(pod, state);
      return;
    }
    if (state.terminating) return;
    const exited = state.containers.filter((c) => !c.proc.isRunning());
    if (exited.length === 0) return;
    if ((pod.spec?.restartPolicy ?? 'Always') === 'Always') {
      const kubeconfig = await kubeconfigFor(pod);
      for (const c of exited) {
        const spec = fencepostContainers(pod).find((x) => x.name === c.container);
        if (spec === undefined) continue;
        c.restarts++;
        await sleep(1000); // the kubelet's first back-off
        await startContainer(pod, spec, kubeconfig, c);
      }
    } else if (!state.reported && exited.length === state.containers.length) {
      await reportExit(pod, state); // a 409 (the controller patched the pod) throws: retried next round
      state.reported = true;
    }
  };

  const sync = async (): Promise<void> => {
    const lists = o.namespaces === 'all' ? [await core.listPodForAllNamespaces()] : await Promise.all(o.namespaces.map((namespace) => core.listNamespacedPod({ namespace })));
    const seen = new Set<string>();
    for (const pod of lists.flatMap((l) => l.items)) {
      seen.add(pod.metadata?.uid ?? '');
      try { await syncPod(pod); } catch { /* a conflict or a restarting API server: next round */ }
    }
    for (const [uid, state] of pods) {
      if (!seen.has(uid) && !state.terminating) terminate(undefined, state); // deleted at once (grace 0)
    }
  };

  const loop = (async () => {
    while (!stopped) {
      try { await sync(); } catch { /* the API server restarts in some tests; try again next round */ }
      await sleep(o.pollMs ?? 100);
    }
  })();

  return {
    containers: () => all,
    running: () => all.filter((c) => c.proc.isRunning()),
    async stop() {
      stopped = true;
      await loop;
      await Promise.all(all.map((c) => c.proc.stop(5000)));
    },
  };
}
