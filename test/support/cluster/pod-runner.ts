/**
 * PodRunner: the kubelet's part for fencepost containers, on a cluster whose nodes are kwok's fakes.
 * kwok marks scheduled pods Running and Ready but runs nothing; the runner starts the containers it
 * can run as local processes, with that pod's identity: those whose image is fencepost's (the agent
 * sidecar, `fencepost exec`, the controller), little scripts whose image is `node` (command
 * `node ...`, run with this Node; test applications that record what they see), and shell scripts
 * whose image is curl's (`curlimages/curl`, command `sh ...`, run with this machine's sh and curl:
 * the job scripts of examples that talk to the agent's HTTP API; they must be POSIX sh, as the
 * image's busybox ash and Debian's dash both run them). For each:
 *
 * - a ServiceAccount token bound to the pod (TokenRequest with boundObjectRef), for the pod's
 *   serviceAccountName, in a kubeconfig given as KUBECONFIG — the permissions are the pod's own;
 * - the container's env resolved as the kubelet does (value, fieldRef, secretKeyRef) and `$(VAR)`
 *   in args expanded;
 * - listen addresses in fencepost args (`--listen`, `--*-bind-address`, and the command's default
 *   ports) moved to free loopback ports, recorded by the container port they stand for; the pod
 *   shares one loopback, so `127.0.0.1:PORT` / `localhost:PORT` in env values (and in a script's
 *   args) naming a port of the pod's containers is rewritten to that local port.
 *
 * Order, as the kubelet keeps it (KEP-753, sidecar containers; kuberuntime's
 * computeInitContainerActions and terminationOrdering):
 *
 * - Init containers start one at a time in spec order. A regular one must exit 0 before the next
 *   starts (non-zero: restarted, or the pod fails when its restartPolicy is Never). A restartable
 *   one (`restartPolicy: Always`, a native sidecar) must be *started* before the next starts: its
 *   startupProbe has succeeded, or, without one, its process runs. A startupProbe that fails
 *   failureThreshold times in a row kills the sidecar, which is restarted and probed again.
 * - The main containers start together once every init container is done or started.
 * - A sidecar that exits is restarted whatever the pod's restartPolicy; a main container only
 *   under restartPolicy Always (OnFailure: on a non-zero exit). Restarts wait one second (the
 *   kubelet's first back-off).
 * - When every main container of a Never/OnFailure pod has exited for good, the sidecars are
 *   stopped (last first) and the pod is reported Succeeded or Failed from the main containers'
 *   exit codes alone, so Jobs with native sidecars complete as they would.
 * - When the pod is deleted (deletionTimestamp), the main containers get SIGTERM at once; each
 *   sidecar gets it only after every main container and every later sidecar has exited, or when the
 *   pod's grace period is over; after the grace period (at least 2 s each, as the kubelet's minimum)
 *   SIGKILL. Once all have exited the pod object is deleted with grace 0 (kwok's pod-delete stage
 *   does it for pods the runner runs nothing of).
 *
 * With `runtime: 'crun'` (the e2e suite's FENCEPOST_E2E_RUNTIME=crun) fencepost's containers are
 * containers of the image instead of local processes: each pod gets a rootless sandbox
 * (sandbox.ts: its own network namespace behind slirp4netns, an overlay of the image root), its
 * fencepost containers run with crun (crun-container.ts) with the pod's securityContext and
 * in-cluster config (the ServiceAccount directory mounted read-only, KUBERNETES_SERVICE_HOST
 * 10.0.2.2), and script containers run with this machine's interpreter inside the pod's network
 * namespace. The pod has its own loopback, so nothing is moved; `127.0.0.1:P`/`localhost:P` naming
 * a host service (P not a port of the pod) becomes `10.0.2.2:P`; each container port is forwarded
 * from a host port, so `ports` and probes work as in process mode.
 *
 * Probes other than the startupProbe are left out: kwok reports the pod and its containers Ready.
 * Containers the runner cannot run (application images of examples) count as started at once, and
 * a regular init container of such an image as done. `history()` records every start, probe
 * success, SIGTERM and exit in the order they happened, for tests that check the order.
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CoreV1Api,
  type KubeConfig,
  type V1Container,
  type V1EnvVar,
  type V1Pod,
  type V1Probe,
} from '@kubernetes/client-node';
import { agentBinary } from '../agent-binary.ts';
import { ociConfig, type OciSeccomp } from '../image/oci-config.ts';
import { getStatus } from '../testbed/http-probe.ts';
import { freePort } from '../testbed/ports.ts';
import { spawnManaged, type ManagedProcess } from '../testbed/processes.ts';
import { runtimeDefaultSeccomp, spawnCrunContainer, type ImageUnderTest } from './crun-container.ts';
import { writeServiceAccountDir, writeServiceAccountKubeconfig } from './identity.ts';
import { HOST_LOOPBACK, startSandbox, type Sandbox } from './sandbox.ts';

/** FENCEPOST_MAIN is the command-line entry point run for fencepost containers (the image's ENTRYPOINT). */
export const FENCEPOST_MAIN = resolve(import.meta.dirname, '../../../src/cli/main.ts');
/** IMAGE_AGENT is the agent executable's path in the image (the chart's sidecar command). */
export const IMAGE_AGENT = '/app/bin/fencepost-agent';

/** DEFAULT_PORTS are the listen flags a fencepost command has by default, with the port each stands for. */
const DEFAULT_PORTS: Readonly<Record<string, readonly (readonly [flag: string, port: number])[]>> = {
  agent: [
    ['--listen', 7370],
    ['--metrics-bind-address', 7372],
    ['--health-probe-bind-address', 7371],
  ],
  controller: [
    ['--metrics-bind-address', 8443],
    ['--health-probe-bind-address', 8081],
  ],
  dashboard: [['--address', 8300]],
};
const ADDRESS_FLAG = /^(--listen|--address|--[a-z-]*bind-address)$/;

/** isFencepostImage: the image's repository is `fencepost` or ends in `/fencepost`. */
export function isFencepostImage(image: string | undefined): boolean {
  const repo = (image ?? '').replace(/@.*$/, '').replace(/:[^/:]*$/, '');
  return repo === 'fencepost' || repo.endsWith('/fencepost');
}

/** expandVars replaces `$(NAME)` with env values as the kubelet does (`$$(X)` stays `$(X)`; unknown names stay). */
export function expandVars(text: string, env: Readonly<Record<string, string>>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (m, name: string | undefined) =>
    m === '$$' ? '$' : (env[name ?? ''] ?? m),
  );
}

/**
 * rewriteAddresses moves every listen address in args to a free loopback port (adding the
 * command's default listen flags that are absent) and returns the new args and, for each original
 * port, the local one.
 */
export async function rewriteAddresses(
  args: readonly string[],
  next: () => Promise<number> = freePort,
): Promise<{ args: string[]; ports: Map<number, number> }> {
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
      if (eq > 0) {
        out.push(`${flag}=${await move(a.slice(eq + 1))}`);
        continue;
      }
      const value = args[i + 1];
      if (value !== undefined) {
        out.push(flag, await move(value));
        i++;
        continue;
      }
    }
    out.push(a);
  }
  for (const [flag, port] of DEFAULT_PORTS[args[0] ?? ''] ?? []) {
    if (!seen.has(flag)) out.push(`${flag}=${await move(`0.0.0.0:${port}`)}`);
  }
  return { args: out, ports };
}

/**
 * listenPorts lists the ports a fencepost command listens on: those of its listen flags
 * (`--listen`, `--address`, `--*-bind-address`; "0" disables one) and the defaults of the flags it does not set.
 */
export function listenPorts(args: readonly string[]): number[] {
  const out: number[] = [];
  const seen = new Set<string>();
  const add = (address: string | undefined): void => {
    const port = Number(/:(\d+)$/.exec(address ?? '')?.[1] ?? NaN);
    if (Number.isInteger(port) && port > 0) out.push(port);
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i] ?? '';
    const eq = a.indexOf('=');
    const flag = eq > 0 ? a.slice(0, eq) : a;
    if (!ADDRESS_FLAG.test(flag)) continue;
    seen.add(flag);
    if (eq > 0) add(a.slice(eq + 1));
    else add(args[++i]);
  }
  for (const [flag, port] of DEFAULT_PORTS[args[0] ?? ''] ?? []) if (!seen.has(flag)) out.push(port);
  return out;
}

/**
 * rewriteHostLoopback replaces `127.0.0.1:P` and `localhost:P` for each port P that is not one of
 * the pod's with host:P — in crun mode a pod has its own loopback, and the host's services (redis,
 * the API server) are at the slirp4netns gateway, 10.0.2.2.
 */
export function rewriteHostLoopback(text: string, podPorts: ReadonlySet<number>, host = HOST_LOOPBACK): string {
  return text.replace(/\b(127\.0\.0\.1|localhost):(\d{1,5})\b/g, (m, _h: string, port: string) =>
    podPorts.has(Number(port)) ? m : `${host}:${port}`,
  );
}

/**
 * podPortsOf lists the ports a pod's own containers listen on (crun mode): every declared
 * containerPort, and the listen ports of its fencepost containers' commands.
 */
export function podPortsOf(pod: V1Pod): Set<number> {
  const out = new Set<number>();
  for (const c of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
    for (const p of c.ports ?? []) out.add(p.containerPort);
    if (isFencepostImage(c.image))
      for (const p of listenPorts([...(c.command ?? []).slice(1), ...(c.args ?? [])])) out.add(p);
  }
  return out;
}

/** isScriptImage: the image's repository is `node` or ends in `/node` (a test application run with this Node). */
export function isScriptImage(image: string | undefined): boolean {
  const repo = (image ?? '').replace(/@.*$/, '').replace(/:[^/:]*$/, '');
  return repo === 'node' || repo.endsWith('/node');
}

/** isCurlImage: the image's repository is `curl` or ends in `/curl` (curlimages/curl: a shell script with curl). */
export function isCurlImage(image: string | undefined): boolean {
  const repo = (image ?? '').replace(/@.*$/, '').replace(/:[^/:]*$/, '');
  return repo === 'curl' || repo.endsWith('/curl');
}

/**
 * scriptInterpreter: the local program that runs a script container in place of its image's
 * (`node` image with command `node …`: this Node; curl image with command `sh …`: this sh), or
 * undefined when the container is not such a script.
 */
export function scriptInterpreter(c: Pick<V1Container, 'image' | 'command'>): string | undefined {
  if (isScriptImage(c.image) && c.command?.[0] === 'node') return process.execPath;
  if (isCurlImage(c.image) && c.command?.[0] === 'sh') return 'sh';
  return undefined;
}

/** rewriteLoopbackPorts replaces `127.0.0.1:P` and `localhost:P` for each pod port P with its local port. */
export function rewriteLoopbackPorts(text: string, ports: ReadonlyMap<number, number>): string {
  return text.replace(/\b(127\.0\.0\.1|localhost):(\d{1,5})\b/g, (m, host: string, port: string) => {
    const local = ports.get(Number(port));
    return local === undefined ? m : `${host}:${local}`;
  });
}

/** isSidecar: an init container with `restartPolicy: Always` (a native sidecar, KEP-753). */
export function isSidecar(c: V1Container): boolean {
  return c.restartPolicy === 'Always';
}

/**
 * terminationPrereqs says, for each container of the pod, which others must have exited before it
 * gets SIGTERM (the kubelet's newTerminationOrdering): a sidecar waits for every main container
 * and for the next sidecar after it in spec order; main containers wait for nothing.
 */
export function terminationPrereqs(pod: V1Pod): Map<string, string[]> {
  const mains = (pod.spec?.containers ?? []).map((c) => c.name);
  const out = new Map<string, string[]>(mains.map((m) => [m, []]));
  let later: string | undefined;
  for (const c of [...(pod.spec?.initContainers ?? [])].reverse()) {
    if (!isSidecar(c)) continue;
    out.set(c.name, later === undefined ? [...mains] : [...mains, later]);
    later = c.name;
  }
  return out;
}

/** ContainerKind: a regular init container, a native sidecar, or a main container. */
export type ContainerKind = 'init' | 'sidecar' | 'main';

/** RunningContainer is one container of a pod that the runner runs as a local process. */
export interface RunningContainer {
  readonly namespace: string;
  readonly pod: string;
  readonly uid: string;
  readonly container: string;
  readonly kind: ContainerKind;
  /** ports maps each container port the process listens for to its local loopback port. */
  readonly ports: ReadonlyMap<number, number>;
  readonly logFile: string;
  /** proc is the current process (a new one after a restart). */
  proc: ManagedProcess;
  /** exitCode is the last exit (number or signal name), once the process has ended. */
  exitCode: number | string | undefined;
  restarts: number;
}

/** LifecycleEvent is one step of a container's life as the runner made it happen. */
export interface LifecycleEvent {
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
  /** started: a process was spawned; probed: its startupProbe succeeded; sigterm: it was asked to stop; exited. */
  readonly what: 'started' | 'probed' | 'sigterm' | 'exited';
  readonly exitCode?: number | string;
}

/**
 * PodRuntime is how fencepost's containers run: as local processes ('process', the fast default:
 * listen ports moved to free loopback ports, KUBECONFIG with the pod's token), or as containers of
 * the image ('crun': test/support/cluster/sandbox.ts and crun-container.ts; one rootless sandbox
 * per pod whose containers share its loopback, in-cluster config with the ServiceAccount
 * directory mounted, the host's services at 10.0.2.2).
 */
export type PodRuntime = 'process' | 'crun';

/** SERVICE_ACCOUNT_MOUNT is where the kubelet mounts a pod's ServiceAccount token, CA and namespace. */
const SERVICE_ACCOUNT_MOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

/** PodRunnerOptions configures startPodRunner. */
export interface PodRunnerOptions {
  /** admin is an admin KubeConfig (pod reads, TokenRequests, Secret reads, pod status writes). */
  readonly admin: KubeConfig;
  /** namespaces whose pods to run; 'all' for every namespace. */
  readonly namespaces: readonly string[] | 'all';
  /** dir keeps the kubeconfigs and the containers' logs. */
  readonly dir: string;
  readonly pollMs?: number;
  /** runtime (default 'process'); 'crun' needs image. */
  readonly runtime?: PodRuntime;
  /** image is the unpacked fencepost image that crun mode runs (unless pull is given). */
  readonly image?: ImageUnderTest;
  /**
   * pull, in crun mode, resolves a pod's fencepost image reference to an unpacked image, as a
   * node's runtime pulls it (test/support/image/archive.ts pullImageRootfs: from a registry, by
   * digest); every pod then runs the image its spec names instead of `image`.
   */
  readonly pull?: (reference: string) => ImageUnderTest;
  /** pidFile records sandboxes, relays, slirp4netns, crun and the crun state root for reapStale (crun mode). */
  readonly pidFile?: string;
}

/** PodRunner is running. */
export interface PodRunner {
  readonly runtime: PodRuntime;
  /** hostAddress is where a pod's containers reach this machine's loopback services (127.0.0.1, or 10.0.2.2 under crun). */
  readonly hostAddress: string;
  /** containers lists every container the runner has started (all namespaces), the newest last. */
  containers(): readonly RunningContainer[];
  /** running lists the containers whose process runs now. */
  running(): readonly RunningContainer[];
  /** history lists every start, startupProbe success, SIGTERM and exit, in order. */
  history(): readonly LifecycleEvent[];
  /** stop ends every process (SIGTERM, then SIGKILL) and the poll loop. */
  stop(): Promise<void>;
}

/** CrunPod is a pod's sandbox in crun mode, with its image root (an overlay) and its directory. */
interface CrunPod {
  readonly sandbox: Sandbox;
  /** image is the fencepost image the pod's containers run; rootfs its overlay. */
  readonly image: ImageUnderTest;
  readonly rootfs: string;
  readonly dir: string;
  readonly podPorts: ReadonlySet<number>;
}

interface PodState {
  readonly containers: RunningContainer[];
  /** crun is the pod's sandbox being made or made (crun mode). */
  crun?: Promise<CrunPod>;
  /** ports: every container port of the pod mapped so far, to its local port (the pod's loopback). */
  readonly ports: Map<number, number>;
  /** mainsStarted: the init sequence is over and the main containers have been started. */
  mainsStarted: boolean;
  /** failed: a regular init container failed under restartPolicy Never (reported Failed). */
  failed: boolean;
  terminating: boolean;
  /** finished: every main container exited for good and the sidecars were stopped; the status is to be reported. */
  finished: boolean;
  /** reported: the pod's final status was written (retried every round until it is). */
  reported: boolean;
}

/** Terminating: the pod began terminating while a container was being prepared; it is not started. */
class Terminating extends Error {}

/** MIN_GRACE_MS: the kubelet never gives a container less than 2 s after SIGTERM (minimumGracePeriodInSeconds). */
const MIN_GRACE_MS = 2000;

/** startPodRunner polls the namespaces' pods and runs their runnable containers until stop(). */
export function startPodRunner(o: PodRunnerOptions): PodRunner {
  const core = o.admin.makeApiClient(CoreV1Api);
  const pods = new Map<string, PodState>(); // by pod UID
  const all: RunningContainer[] = [];
  const history: LifecycleEvent[] = [];
  let stopped = false;
  mkdirSync(o.dir, { recursive: true });
  const runtime = o.runtime ?? 'process';
  if (runtime === 'crun' && o.image === undefined && o.pull === undefined)
    throw new Error('pod runner: crun mode needs the image (or pull)');
  const pidFile = o.pidFile ?? join(o.dir, 'pids');
  /** crunDir holds the sandboxes, bundles and crun's state root: traversable by the sandboxes' uid. */
  let crunDir: string | undefined;
  const crunRoot = (): string => {
    if (crunDir === undefined) {
      crunDir = mkdtempSync(join(tmpdir(), 'fencepost-crun-'));
      chmodSync(crunDir, 0o711);
    }
    return crunDir;
  };
  let containerSeq = 0;
  const apiPort = new URL(o.admin.getCurrentCluster()?.server ?? 'https://127.0.0.1').port || '443';
  let defaultSeccomp: OciSeccomp | undefined;
  const seccompFor = (pod: V1Pod, c: V1Container): OciSeccomp | 'unconfined' => {
    const type = c.securityContext?.seccompProfile?.type ?? pod.spec?.securityContext?.seccompProfile?.type;
    if (type !== 'RuntimeDefault') return 'unconfined';
    defaultSeccomp ??= runtimeDefaultSeccomp();
    return defaultSeccomp;
  };
  const crunPods = new Set<Promise<CrunPod>>();
  /** startCrunPod makes a pod's sandbox and its image root (an overlay of the image, root only). */
  const startCrunPod = async (pod: V1Pod): Promise<CrunPod> => {
    const reference = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].find((c) =>
      isFencepostImage(c.image),
    )?.image;
    const image = o.pull !== undefined && reference !== undefined ? o.pull(reference) : o.image;
    if (image === undefined) throw new Error('pod runner: crun mode without an image');
    const dir = join(crunRoot(), pod.metadata?.uid ?? '');
    mkdirSync(dir, { recursive: true, mode: 0o711 });
    const sandbox = await startSandbox({
      name: `${pod.metadata?.namespace ?? ''}.${pod.metadata?.name ?? ''}`,
      dir: join(dir, 'sandbox'),
      pidFile,
    });
    try {
      const rootfs =
        process.getuid?.() === 0
          ? await sandbox.overlay(image.rootfs, join(dir, 'root'), [SERVICE_ACCOUNT_MOUNT])
          : image.rootfs;
      return { sandbox, image, rootfs, dir, podPorts: podPortsOf(pod) };
    } catch (err) {
      await sandbox.stop();
      throw err;
    }
  };
  /** releaseCrunPod stops a pod's sandbox once its containers are gone and removes its directory. */
  const releaseCrunPod = async (state: PodState): Promise<void> => {
    const p = state.crun;
    if (p === undefined) return;
    crunPods.delete(p);
    const cp = await p.catch(() => undefined);
    if (cp === undefined) return;
    await cp.sandbox.stop();
    rmSync(cp.dir, { recursive: true, force: true });
  };

  const note = (rc: RunningContainer, what: LifecycleEvent['what'], exitCode?: number | string): void => {
    history.push({
      namespace: rc.namespace,
      pod: rc.pod,
      container: rc.container,
      what,
      ...(exitCode !== undefined ? { exitCode } : {}),
    });
  };
  const runnable = (c: V1Container): boolean => isFencepostImage(c.image) || scriptInterpreter(c) !== undefined;
  const kindOf = (pod: V1Pod, c: V1Container): ContainerKind => {
    if (!(pod.spec?.initContainers ?? []).includes(c)) return 'main';
    return isSidecar(c) ? 'sidecar' : 'init';
  };
  const specOf = (pod: V1Pod, name: string): V1Container | undefined =>
    [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].find((c) => c.name === name);

  const kubeconfigFor = (pod: V1Pod): Promise<string> =>
    writeServiceAccountKubeconfig(
      o.admin,
      pod.metadata?.namespace ?? '',
      pod.spec?.serviceAccountName ?? 'default',
      join(o.dir, `${pod.metadata?.namespace ?? ''}.${pod.metadata?.name ?? ''}.kubeconfig`),
      { name: pod.metadata?.name ?? '', uid: pod.metadata?.uid ?? '' },
    );

  const fieldValue = (pod: V1Pod, path: string): string => {
    const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
    if (m !== null) return (m[1] === 'labels' ? pod.metadata?.labels : pod.metadata?.annotations)?.[m[2] ?? ''] ?? '';
    switch (path) {
      case 'metadata.name':
        return pod.metadata?.name ?? '';
      case 'metadata.namespace':
        return pod.metadata?.namespace ?? '';
      case 'metadata.uid':
        return pod.metadata?.uid ?? '';
      case 'spec.nodeName':
        return pod.spec?.nodeName ?? '';
      case 'spec.serviceAccountName':
        return pod.spec?.serviceAccountName ?? '';
      case 'status.podIP':
        return pod.status?.podIP ?? '';
      default:
        throw new Error(`pod runner: fieldRef ${path} not supported`);
    }
  };

  const resolveEnv = async (pod: V1Pod, vars: readonly V1EnvVar[]): Promise<Record<string, string>> => {
    const env: Record<string, string> = {};
    for (const v of vars) {
      if (v.value !== undefined) env[v.name] = expandVars(v.value, env);
      else if (v.valueFrom?.fieldRef !== undefined) env[v.name] = fieldValue(pod, v.valueFrom.fieldRef.fieldPath);
      else if (v.valueFrom?.secretKeyRef !== undefined) {
        const ref = v.valueFrom.secretKeyRef;
        const secret = await core.readNamespacedSecret({
          namespace: pod.metadata?.namespace ?? '',
          name: ref.name ?? '',
        });
        const data = secret.data?.[ref.key];
        if (data !== undefined) env[v.name] = Buffer.from(data, 'base64').toString('utf8');
        else if (ref.optional !== true) throw new Error(`secret ${ref.name ?? ''} has no key ${ref.key}`);
      } else env[v.name] = '';
    }
    return env;
  };

  /** startProcess starts a container as a local process (process mode): its listen ports moved to free ones. */
  const startProcess = async (
    pod: V1Pod,
    c: V1Container,
    state: PodState,
    env: Record<string, string>,
    kubeconfig: string,
    logFile: string,
    restartOf?: RunningContainer,
  ): Promise<{ proc: ManagedProcess; ports: Map<number, number> }> => {
    for (const [k, v] of Object.entries(env)) env[k] = rewriteLoopbackPorts(v, state.ports);
    const expanded = [...(c.command ?? []).slice(1), ...(c.args ?? [])].map((a) => expandVars(a, env));
    // A fencepost container runs the image's ENTRYPOINT (Node, src/cli/main.ts) unless its command
    // is the agent executable, which runs the locally built one (test/support/agent-binary.ts).
    const agentExecutable = isFencepostImage(c.image) && c.command?.[0] === IMAGE_AGENT;
    let args: string[];
    let ports = new Map<number, number>();
    if (isFencepostImage(c.image)) {
      // A restarted container listens on the same local ports as before (they are what tests know).
      const previous = restartOf !== undefined ? [...restartOf.ports.values()] : [];
      ({ args, ports } = await rewriteAddresses(expanded, async () => previous.shift() ?? (await freePort())));
      if (!agentExecutable) args = [FENCEPOST_MAIN, ...args];
    } else {
      args = expanded.map((a) => rewriteLoopbackPorts(a, state.ports));
    }
    for (const [port, local] of ports) state.ports.set(port, local);
    if (state.terminating || stopped) throw new Terminating();
    const name = pod.metadata?.name ?? '';
    const proc = spawnManaged(
      `${name}/${c.name}`,
      agentExecutable
        ? agentBinary()
        : isFencepostImage(c.image)
          ? process.execPath
          : (scriptInterpreter(c) ?? process.execPath),
      {
        args,
        logFile,
        env: {
          PATH: process.env['PATH'] ?? '/usr/bin:/bin',
          HOME: process.env['HOME'] ?? '/tmp',
          ...env,
          KUBECONFIG: kubeconfig,
        },
      },
    );
    return { proc, ports };
  };

  /**
   * startInSandbox starts a container in the pod's sandbox (crun mode): a fencepost container as a
   * crun container of the image (in-cluster config, the ServiceAccount directory mounted
   * read-only, the pod's securityContext), a script with this machine's interpreter in the pod's
   * network namespace. Nothing is moved: the pod has its own loopback; the host's services named
   * by 127.0.0.1/localhost are at 10.0.2.2; each container port is forwarded to a host port.
   */
  const startInSandbox = async (
    pod: V1Pod,
    c: V1Container,
    state: PodState,
    cp: CrunPod,
    env: Record<string, string>,
    kubeconfig: string,
    logFile: string,
  ): Promise<{ proc: ManagedProcess; ports: Map<number, number> }> => {
    const ns = pod.metadata?.namespace ?? '';
    const name = pod.metadata?.name ?? '';
    const uid = pod.metadata?.uid ?? '';
    for (const [k, v] of Object.entries(env)) env[k] = rewriteHostLoopback(v, cp.podPorts);
    const expand = (a: string): string => rewriteHostLoopback(expandVars(a, env), cp.podPorts);
    const ports = new Map<number, number>();
    const declared = (c.ports ?? []).map((p) => p.containerPort);
    const fencepost = isFencepostImage(c.image);
    const listening = fencepost ? listenPorts([...(c.command ?? []).slice(1), ...(c.args ?? [])].map(expand)) : [];
    for (const port of [...listening, ...declared]) ports.set(port, await cp.sandbox.forward(port));
    for (const [port, local] of ports) state.ports.set(port, local);
    if (!fencepost) {
      if (state.terminating || stopped) throw new Terminating();
      // The kubeconfig names the API server at 127.0.0.1: from the pod it is 10.0.2.2 (in its certificate).
      const podKubeconfig = `${kubeconfig}.pod`;
      writeFileSync(podKubeconfig, rewriteHostLoopback(readFileSync(kubeconfig, 'utf8'), cp.podPorts), { mode: 0o600 });
      const [enter, ...enterArgs] = cp.sandbox.enter();
      const proc = spawnManaged(`${name}/${c.name}`, enter ?? 'nsenter', {
        args: [
          ...enterArgs,
          scriptInterpreter(c) ?? process.execPath,
          ...[...(c.command ?? []).slice(1), ...(c.args ?? [])].map(expand),
        ],
        logFile,
        env: {
          PATH: process.env['PATH'] ?? '/usr/bin:/bin',
          HOME: process.env['HOME'] ?? '/tmp',
          ...env,
          KUBECONFIG: podKubeconfig,
        },
      });
      return { proc, ports };
    }
    const sc = c.securityContext;
    const psc = pod.spec?.securityContext;
    const image = cp.image;
    const user = Number(/^(\d+)/.exec(image.config.User ?? '')?.[1] ?? 65532);
    const runAs = sc?.runAsUser ?? psc?.runAsUser ?? user;
    const group = sc?.runAsGroup ?? psc?.runAsGroup ?? runAs;
    const saDir = await writeServiceAccountDir(
      o.admin,
      ns,
      pod.spec?.serviceAccountName ?? 'default',
      join(cp.dir, 'serviceaccount'),
      { name, uid },
      cp.sandbox.hostUid,
    );
    if (state.terminating || stopped) throw new Terminating();
    const id = `${uid.slice(0, 8)}-${c.name}-${++containerSeq}`;
    const proc = spawnCrunContainer(`${name}/${c.name}`, {
      id,
      sandbox: cp.sandbox,
      stateRoot: join(crunRoot(), 'state'),
      bundle: join(cp.dir, 'bundles', c.name),
      logFile,
      pidFile,
      config: ociConfig(image.config, {
        rootfs: cp.rootfs,
        ...(c.command !== undefined ? { command: c.command.map(expand) } : {}),
        ...(c.args !== undefined ? { args: c.args.map(expand) } : {}),
        env: {
          ...env,
          HOSTNAME: name,
          KUBERNETES_SERVICE_HOST: HOST_LOOPBACK,
          KUBERNETES_SERVICE_PORT: apiPort,
        },
        ...(c.workingDir !== undefined ? { workingDir: c.workingDir } : {}),
        mounts: [
          {
            destination: SERVICE_ACCOUNT_MOUNT,
            type: 'none',
            source: saDir,
            options: ['rbind', 'ro', 'nosuid', 'nodev', 'noexec'],
          },
        ],
        netns: cp.sandbox.netns,
        userns: cp.sandbox.userns(runAs, group),
        uid: runAs,
        gid: group,
        fsGroup: group, // one gid is mapped into the container's user namespace
        runAsNonRoot: sc?.runAsNonRoot ?? psc?.runAsNonRoot ?? false,
        readonlyRoot: sc?.readOnlyRootFilesystem ?? false,
        allowPrivilegeEscalation: sc?.allowPrivilegeEscalation ?? true,
        seccomp: seccompFor(pod, c),
        hostname: name,
      }),
    });
    return { proc, ports };
  };

  const startContainer = async (
    pod: V1Pod,
    c: V1Container,
    state: PodState,
    kubeconfig: string,
    restartOf?: RunningContainer,
  ): Promise<RunningContainer> => {
    const ns = pod.metadata?.namespace ?? '';
    const name = pod.metadata?.name ?? '';
    const env = await resolveEnv(pod, c.env ?? []);
    const logFile = join(o.dir, `${ns}.${name}.${c.name}.log`);
    const { proc, ports } =
      state.crun !== undefined
        ? await startInSandbox(pod, c, state, await state.crun, env, kubeconfig, logFile)
        : await startProcess(pod, c, state, env, kubeconfig, logFile, restartOf);
    const rc: RunningContainer = restartOf ?? {
      namespace: ns,
      pod: name,
      uid: pod.metadata?.uid ?? '',
      container: c.name,
      kind: kindOf(pod, c),
      ports: new Map(ports),
      logFile,
      proc,
      exitCode: undefined,
      restarts: 0,
    };
    rc.proc = proc;
    rc.exitCode = undefined;
    if (restartOf === undefined) {
      all.push(rc);
      state.containers.push(rc);
    }
    note(rc, 'started');
    void proc.exited.then((code) => {
      rc.exitCode = code;
      note(rc, 'exited', code);
    });
    return rc;
  };

  /** probeOnce runs one attempt of an httpGet or tcpSocket probe against the container's local port. */
  const probeOnce = async (c: V1Container, rc: RunningContainer, p: V1Probe): Promise<boolean> => {
    if (!rc.proc.isRunning()) return false;
    const target = p.httpGet?.port ?? p.tcpSocket?.port;
    const containerPort = typeof target === 'number' ? target : c.ports?.find((x) => x.name === target)?.containerPort;
    const local = containerPort === undefined ? undefined : rc.ports.get(containerPort);
    if (local === undefined)
      throw new Error(`pod runner: probe port ${String(target)} of ${rc.pod}/${rc.container} is not one it listens on`);
    const timeoutMs = (p.timeoutSeconds ?? 1) * 1000;
    if (p.httpGet !== undefined) {
      try {
        const { status } = await getStatus(`http://127.0.0.1:${local}${p.httpGet.path ?? '/'}`, undefined, timeoutMs);
        return status >= 200 && status < 400; // the kubelet's rule
      } catch {
        return false;
      }
    }
    if (p.tcpSocket !== undefined) {
      return new Promise((done) => {
        const sock = connect(local, '127.0.0.1');
        sock.setTimeout(timeoutMs, () => {
          sock.destroy();
          done(false);
        });
        sock.once('connect', () => {
          sock.destroy();
          done(true);
        });
        sock.once('error', () => {
          done(false);
        });
      });
    }
    throw new Error(`pod runner: only httpGet and tcpSocket probes are supported (${rc.pod}/${rc.container})`);
  };

  /**
   * waitStarted resolves true once a sidecar counts as started (its startupProbe succeeded, or it
   * runs when it has none), false if the pod is deleted first. failureThreshold failures in a row
   * kill the process; the sync loop restarts it and probing begins again.
   */
  const waitStarted = async (pod: V1Pod, c: V1Container, rc: RunningContainer, state: PodState): Promise<boolean> => {
    const p = c.startupProbe;
    if (p === undefined) return true;
    const periodMs = (p.periodSeconds ?? 10) * 1000;
    const threshold = p.failureThreshold ?? 3;
    let proc: ManagedProcess | undefined;
    let failures = 0;
    for (;;) {
      if (state.terminating || stopped) return false;
      if (proc !== rc.proc) {
        // a new process: start counting again after its initial delay
        proc = rc.proc;
        failures = 0;
        await sleep((p.initialDelaySeconds ?? 0) * 1000);
        continue;
      }
      if (await probeOnce(c, rc, p)) {
        note(rc, 'probed');
        return true;
      }
      if (proc.isRunning() && ++failures >= threshold) {
        note(rc, 'sigterm');
        await proc.stop((p.terminationGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000); // the sync loop restarts it
      }
      await sleep(periodMs);
    }
  };

  /** runInit runs the init sequence of a pod, then starts its main containers. */
  const runInit = async (pod: V1Pod, state: PodState, kubeconfig: string): Promise<void> => {
    for (const c of pod.spec?.initContainers ?? []) {
      if (!runnable(c)) continue; // not run here: started (sidecar) or done (regular) at once
      for (;;) {
        if (state.terminating || stopped) return;
        const existing = state.containers.find((x) => x.container === c.name);
        const rc = existing ?? (await startContainer(pod, c, state, kubeconfig));
        if (isSidecar(c)) {
          if (!(await waitStarted(pod, c, rc, state))) return;
          break;
        }
        const code = await rc.proc.exited;
        if (code === 0) break;
        if ((pod.spec?.restartPolicy ?? 'Always') === 'Never') {
          state.failed = true;
          return;
        }
        rc.restarts++;
        await sleep(1000);
        await startContainer(pod, c, state, kubeconfig, rc);
      }
    }
    if (state.terminating || stopped) return;
    for (const c of pod.spec?.containers ?? []) if (runnable(c)) await startContainer(pod, c, state, kubeconfig);
    state.mainsStarted = true;
  };

  const reportExit = async (pod: V1Pod, state: PodState): Promise<void> => {
    const mains = state.containers.filter((c) => c.kind !== 'sidecar');
    const codes = mains.map((c) => (typeof c.exitCode === 'number' ? c.exitCode : 137));
    const now = new Date();
    const fresh = await core.readNamespacedPod({
      namespace: pod.metadata?.namespace ?? '',
      name: pod.metadata?.name ?? '',
    });
    const terminated = (
      c: V1Container,
    ): {
      name: string;
      image: string;
      imageID: string;
      ready: boolean;
      restartCount: number;
      state: { terminated: { exitCode: number; reason: string; startedAt: Date; finishedAt: Date } };
    } => {
      const rc = state.containers.find((r) => r.container === c.name);
      const exitCode = rc !== undefined && typeof rc.exitCode === 'number' ? rc.exitCode : 0;
      return {
        name: c.name,
        image: c.image ?? '',
        imageID: '',
        ready: false,
        restartCount: rc?.restarts ?? 0,
        state: {
          terminated: { exitCode, reason: exitCode === 0 ? 'Completed' : 'Error', startedAt: now, finishedAt: now },
        },
      };
    };
    fresh.status = {
      ...fresh.status,
      phase: !state.failed && codes.every((c) => c === 0) ? 'Succeeded' : 'Failed',
      conditions: [{ type: 'Ready', status: 'False', lastTransitionTime: now, reason: 'PodCompleted' }],
      initContainerStatuses: (fresh.spec?.initContainers ?? []).map(terminated),
      containerStatuses: (fresh.spec?.containers ?? []).map(terminated),
    };
    await core.replaceNamespacedPodStatus({
      namespace: fresh.metadata?.namespace ?? '',
      name: fresh.metadata?.name ?? '',
      body: fresh,
    });
  };

  /**
   * stopInOrder stops the pod's processes in the kubelet's order (terminationPrereqs), within one
   * grace period shared by all, and resolves when all have exited.
   */
  const stopInOrder = async (pod: V1Pod | undefined, state: PodState, graceMs: number): Promise<void> => {
    const deadline = performance.now() + graceMs;
    const prereqs = pod !== undefined ? terminationPrereqs(pod) : new Map<string, string[]>();
    const exitedOf = (name: string): Promise<unknown> =>
      state.containers.find((c) => c.container === name)?.proc.exited ?? Promise.resolve();
    await Promise.all(
      state.containers.map(async (rc) => {
        const waitFor = (prereqs.get(rc.container) ?? []).filter((n) => n !== rc.container);
        if (waitFor.length > 0)
          await Promise.race([Promise.all(waitFor.map(exitedOf)), sleep(Math.max(0, deadline - performance.now()))]);
        if (!rc.proc.isRunning()) return;
        note(rc, 'sigterm');
        await rc.proc.stop(Math.max(MIN_GRACE_MS, deadline - performance.now()));
      }),
    );
  };

  /** terminate stops a deleted pod's processes in order and then, as the kubelet does, deletes the pod object with grace 0. */
  const terminate = (pod: V1Pod | undefined, state: PodState): void => {
    state.terminating = true;
    const graceMs =
      Math.min(30, pod?.metadata?.deletionGracePeriodSeconds ?? pod?.spec?.terminationGracePeriodSeconds ?? 30) * 1000;
    void stopInOrder(pod, state, graceMs).then(async () => {
      await releaseCrunPod(state);
      if (pod === undefined || stopped) return;
      await core
        .deleteNamespacedPod({
          namespace: pod.metadata?.namespace ?? '',
          name: pod.metadata?.name ?? '',
          gracePeriodSeconds: 0,
          body: { preconditions: { uid: pod.metadata?.uid ?? '' } },
        })
        .catch(() => undefined);
    });
  };

  /** syncPod starts, restarts, completes or stops one pod's containers. */
  const syncPod = async (pod: V1Pod): Promise<void> => {
    const uid = pod.metadata?.uid ?? '';
    const state = pods.get(uid);
    if (state === undefined) {
      const running =
        pod.status?.phase === 'Running' &&
        (pod.spec?.nodeName ?? '') !== '' &&
        pod.metadata?.deletionTimestamp === undefined;
      const wanted = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].filter(runnable);
      if (!running || wanted.length === 0) return;
      const kubeconfig = await kubeconfigFor(pod); // throws before anything started: retried next round
      const fresh: PodState = {
        containers: [],
        ports: new Map(),
        mainsStarted: false,
        failed: false,
        terminating: false,
        finished: false,
        reported: false,
      };
      pods.set(uid, fresh);
      if (runtime === 'crun') {
        fresh.crun = startCrunPod(pod);
        crunPods.add(fresh.crun);
      }
      void runInit(pod, fresh, kubeconfig).catch((err: unknown) => {
        if (!(err instanceof Terminating))
          process.stderr.write(`pod runner: ${pod.metadata?.name ?? ''}: ${String(err)}\n`);
      });
      return;
    }
    if (pod.metadata?.deletionTimestamp !== undefined) {
      if (!state.terminating) terminate(pod, state);
      return;
    }
    if (state.finished && !state.reported) {
      // The last write lost a race (409: e.g. the controller unlabelled the former holder meanwhile): again.
      state.reported = await reportExit(pod, state).then(
        () => true,
        () => false,
      );
      return;
    }
    if (state.terminating || state.reported) return;
    const policy = pod.spec?.restartPolicy ?? 'Always';
    const mains = state.containers.filter((c) => c.kind === 'main');
    const completed =
      state.failed ||
      (state.mainsStarted &&
        mains.length > 0 &&
        policy !== 'Always' &&
        mains.every((c) => c.exitCode !== undefined && (policy === 'Never' || c.exitCode === 0)));
    if (completed) {
      // Every main container has exited for good: stop the sidecars (last first) and report.
      state.terminating = true;
      await stopInOrder(pod, state, 30_000);
      await releaseCrunPod(state);
      state.finished = true;
      state.reported = await reportExit(pod, state).then(
        () => true,
        () => false,
      ); // false: retried next round
      return;
    }
    const restart = state.containers.filter(
      (c) =>
        !c.proc.isRunning() &&
        (c.kind === 'sidecar' ||
          (c.kind === 'main' && (policy === 'Always' || (policy === 'OnFailure' && c.exitCode !== 0)))),
    );
    if (restart.length === 0) return;
    const kubeconfig = await kubeconfigFor(pod);
    for (const c of restart) {
      const spec = specOf(pod, c.container);
      if (spec === undefined) continue;
      c.restarts++;
      await sleep(1000); // the kubelet's first back-off
      if (!state.terminating) await startContainer(pod, spec, state, kubeconfig, c);
    }
  };

  const sync = async (): Promise<void> => {
    const lists =
      o.namespaces === 'all'
        ? [await core.listPodForAllNamespaces()]
        : await Promise.all(o.namespaces.map((namespace) => core.listNamespacedPod({ namespace })));
    const seen = new Set<string>();
    for (const pod of lists.flatMap((l) => l.items)) {
      seen.add(pod.metadata?.uid ?? '');
      try {
        await syncPod(pod);
      } catch {
        /* a conflict or a restarting API server: next round */
      }
    }
    for (const [uid, state] of pods) {
      if (!seen.has(uid) && !state.terminating) terminate(undefined, state); // deleted at once (grace 0)
    }
  };

  const loop = (async () => {
    while (!stopped) {
      try {
        await sync();
      } catch {
        /* the API server restarts in some tests; try again next round */
      }
      await sleep(o.pollMs ?? 100);
    }
  })();

  return {
    runtime,
    hostAddress: runtime === 'crun' ? HOST_LOOPBACK : '127.0.0.1',
    containers: () => all,
    running: () => all.filter((c) => c.proc.isRunning()),
    history: () => history,
    async stop() {
      stopped = true;
      await loop;
      await Promise.all(all.map((c) => c.proc.stop(5000)));
      for (const p of crunPods) await (await p.catch(() => undefined))?.sandbox.stop();
      if (crunDir !== undefined) rmSync(crunDir, { recursive: true, force: true });
    },
  };
}
