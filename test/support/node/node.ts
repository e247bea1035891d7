/**
 * startNode: a real Kubernetes node beside a test control plane — containerd v2 with runc and the
 * CNI plugins (bridge, host-local, loopback, portmap), and a kubelet of the control plane's
 * release, all built by hack/testbed/build.sh. Everything lives in one folder (<plane>/node): the
 * configurations, containerd's root and state, the kubelet's root, pod logs, CNI state, sockets.
 * Every process is started and stopped by PID; every host change (sysctls, the bridge, iptables,
 * the kubelet's cgroup tree, mounts below the folder) goes through the ledger of host-changes.ts
 * first and is undone on stop, or by the next run after a crash (teardownNode).
 *
 * How pods reach the host: the API server and other test servers listen on loopback only. A
 * DNAT rule sends the `kubernetes` Service address (10.0.0.1:443, what in-cluster clients use) to
 * the API server's loopback port, and exposeLoopback(port) does the same for a test server (Redis)
 * at the bridge's gateway address; route_localnet on the bridge lets those packets in.
 *
 * As root only. Seccomp: the chart asks for `seccompProfile: RuntimeDefault`; containerd applies
 * its default profile when the kernel supports seccomp filters (it asks prctl), and runc is built
 * with libseccomp (hack/testbed/build.sh). docs/testbed.md says what to do on a kernel without.
 */
import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { findBinary } from '../testbed/assets.ts';
import type { ControlPlane } from '../testbed/control-plane.ts';
import { freePort } from '../testbed/ports.ts';
import { spawnManaged, tailLog, type ManagedProcess } from '../testbed/processes.ts';
import { HostChanges, undoHostChanges } from './host-changes.ts';

/** PAUSE_IMAGE is the sandbox image, built here from pause.c (no registry is reachable). */
export const PAUSE_IMAGE = 'fencepost.local/pause:3.10';
/** SERVICE_HOST is the `kubernetes` Service's address (the first of the API server's service range). */
export const SERVICE_HOST = '10.0.0.1';

/**
 * NodeNames are a node's host-wide names, derived from its folder, so that two nodes (a person's
 * testbed and a test run) never share a bridge, a subnet, a chain or a cgroup tree: the bridge
 * and its gateway (the pods' way to the host), the pods' subnet, our iptables chain, and the
 * kubelet's cgroup root (every pod process is below it in each hierarchy).
 */
export interface NodeNames {
  readonly bridge: string;
  readonly podCidr: string;
  readonly gateway: string;
  readonly chain: string;
  readonly cgroupRoot: string;
}

/** nodeNames derives a node folder's names. */
export function nodeNames(dir: string): NodeNames {
  const id = createHash('sha256').update(dir).digest('hex').slice(0, 8);
  const octet = 100 + (parseInt(id.slice(0, 2), 16) % 100);
  return {
    bridge: `fcp${id}`,
    podCidr: `10.${octet}.0.0/24`,
    gateway: `10.${octet}.0.1`,
    chain: `FENCEPOST-${id.toUpperCase()}`,
    cgroupRoot: `fencepost-node-${id}`,
  };
}
/** The sysctls the kubelet sets on start (protectKernelDefaults off): recorded, restored on stop. */
const KUBELET_SYSCTLS = [
  'vm.overcommit_memory',
  'vm.panic_on_oom',
  'kernel.panic',
  'kernel.panic_on_oops',
  'kernel.keys.root_maxkeys',
  'kernel.keys.root_maxbytes',
];

/** NodeOptions configures startNode. */
export interface NodeOptions {
  /** name is the Node's name (default fencepost-node). */
  readonly name?: string;
  /**
   * folder is the node's folder under the plane's (default `node`): a second node beside the
   * first has its own, and with it its own containerd root, state and socket, kubelet root, bridge,
   * pod subnet, iptables chain and cgroup root (nodeNames derives them from the folder).
   */
  readonly folder?: string;
  /** taints are registered with the Node (the kubelet's registerWithTaints), e.g. to keep the chart's pods off it. */
  readonly taints?: readonly {
    readonly key: string;
    readonly value?: string;
    readonly effect: 'NoSchedule' | 'NoExecute';
  }[];
  /** images are OCI archives to import into the node's image store under names (the pause image always is). */
  readonly images?: readonly { readonly archive: string; readonly names: readonly string[] }[];
  /** pauseAs are image names the pause image stands in for: an application image that only has to run. */
  readonly pauseAs?: readonly string[];
  /** hostImages are images made at start from this machine's executables (a shell and curl for a job's script). */
  readonly hostImages?: readonly HostImage[];
  /**
   * plainHttpRegistries are registry hosts ("127.0.0.1:PORT") the node's containerd pulls from
   * over plain HTTP: each gets a hosts.toml in the node's own registry configuration folder.
   */
  readonly plainHttpRegistries?: readonly string[];
  /** pidFile records the node's processes for reapStale (default <plane>/pids). */
  readonly pidFile?: string;
}

/** RealNode is a running node. */
export interface RealNode {
  readonly name: string;
  /** ip is the node's InternalIP: the host's interface address (the kubelet refuses loopback). */
  readonly ip: string;
  readonly dir: string;
  readonly containerd: ManagedProcess;
  kubelet(): ManagedProcess;
  /** crictl runs crictl against the node's containerd and returns its output. */
  crictl(args: readonly string[]): string;
  /** names are the node's bridge, subnet, chain and cgroup root. */
  readonly names: NodeNames;
  /** exposeLoopback makes 127.0.0.1:port reachable from pods at the bridge's gateway; returns gateway:port. */
  exposeLoopback(port: number): string;
  /**
   * events records containerd's task starts and exits from now on (`ctr events`), each named by
   * its pod and container (the kubelet's labels): the runtime's own order of what the kubelet did.
   */
  events(): NodeEvents;
  /**
   * podGet makes an HTTP GET inside a pod's network namespace (nsenter, curl), so that a port the
   * pod binds to its loopback (the agent's API) answers the test as it answers the pod's app.
   * Returns the status (0 when nothing answered) and the body.
   */
  podGet(namespace: string, pod: string, url: string): Promise<{ status: number; body: string }>;
  /**
   * containerPid is the host PID of a pod's running container's first process (crictl inspect),
   * for a test that kills or freezes what this node started; undefined when none runs.
   */
  containerPid(namespace: string, pod: string, container: string): number | undefined;
  /**
   * freezePods freezes every process of the node's pods (the cgroup v1 freezer at the kubelet's
   * cgroup root): with stopKubelet, a machine that is gone — nothing of it renews or answers, and
   * nothing exits either. thawPods undoes it (stop and teardownNode thaw too).
   */
  freezePods(): void;
  thawPods(): void;
  /** stopKubelet stops the kubelet (containers keep running, as on a node whose kubelet died). */
  stopKubelet(): Promise<void>;
  /** startKubelet starts it again. */
  startKubelet(): Promise<void>;
  /** stop removes every pod, stops the kubelet and containerd, and undoes every host change. */
  stop(): Promise<void>;
}

/** NodeEvent is one task start or exit in containerd. */
export interface NodeEvent {
  /** at is containerd's timestamp, in ms since the epoch. */
  readonly at: number;
  readonly what: 'start' | 'exit';
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
  readonly exitStatus?: number;
}

/** NodeEvents is a running `ctr events` recorder. */
export interface NodeEvents {
  list(): readonly NodeEvent[];
  stop(): Promise<void>;
}

/** hostAddress is the first non-internal IPv4 address of this machine. */
export function hostAddress(): string {
  for (const addrs of Object.values(networkInterfaces()))
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  throw new Error('startNode: this machine has no non-loopback IPv4 address for the node');
}

function sh(cmd: string, args: readonly string[], input?: string): string {
  const r = spawnSync(cmd, [...args], { encoding: 'utf8', input, maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${String(r.status)}: ${r.stderr.slice(-2000)}`);
  return r.stdout;
}

/** runAsync runs a command and resolves with its standard output, whatever its exit status. */
function runAsync(cmd: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve) => {
    execFile(cmd, [...args], { encoding: 'utf8', timeout: 5000 }, (_err, stdout) => {
      resolve(stdout);
    });
  });
}

function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** HostImage is an image made of this machine's executables, each with the shared libraries it loads. */
export interface HostImage {
  /** names are what pods call the image (e.g. `curlimages/curl:8.11.1`). */
  readonly names: readonly string[];
  /** binaries are absolute paths of executables; each lands at its own path in the image. */
  readonly binaries: readonly string[];
}

/** sharedLibraries lists the libraries an executable loads, and its loader (ldd); none for a static one. */
function sharedLibraries(binary: string): string[] {
  const r = spawnSync('ldd', [binary], { encoding: 'utf8' });
  if (r.status !== 0) return []; // "not a dynamic executable"
  const libs: string[] = [];
  for (const line of r.stdout.split('\n')) {
    // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" or "/lib64/ld-linux-x86-64.so.2 (0x…)"
    const m = /(?:=>\s*)?(\/\S+)\s+\(0x[0-9a-f]+\)/.exec(line);
    if (m?.[1] !== undefined) libs.push(m[1]);
  }
  return libs;
}

/**
 * imageArchive writes an OCI image archive of one layer for `ctr images import`: each file's
 * content (symbolic links followed) at its path in the image, world-readable and executable, with
 * the given entrypoint and user. No registry is reachable here, so the node's images are made so.
 */
function imageArchive(
  work: string,
  name: string,
  files: readonly { readonly from: string; readonly at: string }[],
  config: { readonly Entrypoint?: readonly string[]; readonly User?: string },
): string {
  rmSync(work, { recursive: true, force: true });
  mkdirSync(join(work, 'layer'), { recursive: true });
  mkdirSync(join(work, 'oci', 'blobs', 'sha256'), { recursive: true });
  for (const f of files) {
    const to = join(work, 'layer', f.at);
    mkdirSync(join(to, '..'), { recursive: true });
    writeFileSync(to, readFileSync(f.from), { mode: 0o755 });
  }
  const layerTar = join(work, 'layer.tar');
  sh('tar', [
    '--numeric-owner',
    '--owner=0',
    '--group=0',
    '--mtime=@0',
    '--sort=name',
    '-C',
    join(work, 'layer'),
    '-cf',
    layerTar,
    '.',
  ]);
  const layer = readFileSync(layerTar);
  const blob = (data: Buffer | string): { digest: string; size: number } => {
    const d = sha256(data);
    writeFileSync(join(work, 'oci', 'blobs', 'sha256', d), data);
    return { digest: `sha256:${d}`, size: Buffer.byteLength(data) };
  };
  const l = blob(layer);
  const imageConfig = blob(
    JSON.stringify({
      architecture: 'amd64',
      os: 'linux',
      config: { ...config, Env: ['PATH=/usr/local/bin:/usr/bin:/bin'] },
      rootfs: { type: 'layers', diff_ids: [l.digest] },
    }),
  );
  const manifest = blob(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...imageConfig },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', ...l }],
    }),
  );
  writeFileSync(join(work, 'oci', 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    join(work, 'oci', 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          ...manifest,
          platform: { architecture: 'amd64', os: 'linux' },
          annotations: {
            'io.containerd.image.name': name,
            'org.opencontainers.image.ref.name': name.split(':').at(-1) ?? 'latest',
          },
        },
      ],
    }),
  );
  const out = join(work, 'image.oci.tar');
  sh('tar', ['-C', join(work, 'oci'), '-cf', out, '.']);
  return out;
}

/** pauseArchive is the sandbox image: the static pause binary (hack/testbed/build.sh pause), named PAUSE_IMAGE. */
function pauseArchive(dir: string): string {
  return imageArchive(join(dir, 'pause-image'), PAUSE_IMAGE, [{ from: findBinary('pause'), at: 'pause' }], {
    Entrypoint: ['/pause'],
    User: '65535:65535',
  });
}

/** hostImageArchive makes a HostImage's archive: the executables and every library they load, at their paths. */
function hostImageArchive(dir: string, index: number, image: HostImage): string {
  const paths = new Set<string>();
  for (const b of image.binaries) {
    if (!b.startsWith('/')) throw new Error(`hostImages: binaries must be absolute paths, got ${JSON.stringify(b)}`);
    paths.add(b);
    for (const lib of sharedLibraries(b)) paths.add(lib);
  }
  return imageArchive(
    join(dir, `host-image-${index}`),
    image.names[0] ?? `fencepost.local/host-image-${index}`,
    [...paths].map((p) => ({ from: p, at: p.slice(1) })),
    {},
  );
}

/** registryConfigDir is the node's containerd registry configuration folder (one folder per registry host). */
function registryConfigDir(dir: string): string {
  return join(dir, 'containerd', 'certs.d');
}

/**
 * writePlainHttpRegistry makes containerd pull from host over plain HTTP. containerd 2.4 would
 * guess it for a loopback host with a port (HTTPS first, then HTTP on a TLS error); the explicit
 * http:// server says so instead of relying on a fallback. The folder is the host with its port
 * ("127.0.0.1:5000"), as containerd looks it up.
 */
function writePlainHttpRegistry(dir: string, host: string): void {
  if (!/^[A-Za-z0-9.-]+:\d+$/.test(host))
    throw new Error(`plainHttpRegistries: expected "host:port", got ${JSON.stringify(host)}`);
  const folder = join(registryConfigDir(dir), host);
  mkdirSync(folder, { recursive: true });
  writeFileSync(
    join(folder, 'hosts.toml'),
    `server = "http://${host}"\n\n[host."http://${host}"]\n  capabilities = ["pull", "resolve"]\n`,
  );
}

function containerdConfig(dir: string, assets: { runc: string; cni: string }): string {
  // containerd 2.4's configuration version 4: the sockets are the grpc and ttrpc server plugins'
  // (a top-level [grpc] is ignored in version 4, and containerd would serve /run/containerd).
  // Nothing may default to a host path: NRI (/var/run/nri) is off, CDI and the image verifier
  // look in the node folder, no imports from /etc/containerd.
  return `version = 4
root = "${dir}/containerd/root"
state = "${dir}/containerd/state"
temp = "${dir}/containerd/tmp"
imports = []
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs", "io.containerd.snapshotter.v1.blockfile", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing", "io.containerd.nri.v1.nri"]

[plugins."io.containerd.server.v1.grpc"]
  address = "${dir}/containerd.sock"

[plugins."io.containerd.server.v1.ttrpc"]
  address = "${dir}/containerd.sock.ttrpc"

[plugins."io.containerd.image-verifier.v1.bindir"]
  bin_dir = "${dir}/containerd/image-verifier"

[plugins."io.containerd.internal.v1.opt"]
  path = "${dir}/containerd/opt"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "${PAUSE_IMAGE}"
  # The kubelet's pulls (CRI) read hosts.toml files here, never the host's /etc/containerd/certs.d.
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = "${registryConfigDir(dir)}"

[plugins."io.containerd.cri.v1.runtime"]
  # The kubelet asks for negative OOM scores (-998 for the pause container); this machine's
  # processes may not lower theirs ("failed to update /proc/self/oom_score_adj: Permission
  # denied" from runc), so every score is kept at or above containerd's own.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = ["${dir}/containerd/cdi"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "${assets.runc}"
        Root = "${dir}/runc"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["${assets.cni}"]
    conf_dir = "${dir}/cni/net.d"
    max_conf_num = 1
`;
}

function cniConfig(dir: string, names: NodeNames): string {
  return JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: 'fencepost-node',
      plugins: [
        {
          type: 'bridge',
          bridge: names.bridge,
          isGateway: true,
          ipMasq: true,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: names.podCidr, gateway: names.gateway }]],
            routes: [{ dst: '0.0.0.0/0' }],
            dataDir: join(dir, 'cni', 'ipam'),
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

function kubeletConfig(
  dir: string,
  names: NodeNames,
  caFile: string,
  port: number,
  taints: NodeOptions['taints'],
): string {
  return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host has cgroup v1 and no systemd as PID 1.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /${names.cgroupRoot}
containerRuntimeEndpoint: unix://${dir}/containerd.sock
address: 0.0.0.0
port: ${port}
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: false }
  x509: { clientCAFile: ${caFile} }
authorization:
  mode: AlwaysAllow
failSwapOn: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
hairpinMode: hairpin-veth
podLogsDir: ${dir}/pod-logs
volumePluginDir: ${dir}/kubelet/volume-plugins
# Test images are imported or pulled once: keep them however full the disk is.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: { memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%" }
serializeImagePulls: false
# React quickly: tests wait on what the kubelet does.
syncFrequency: 5s
nodeStatusUpdateFrequency: 4s
# The node's Lease is its heartbeat too: renewed every quarter of this (5 s instead of 10 s), so
# that a node-loss test may run kube-controller-manager with a short node-monitor grace period.
nodeLeaseDurationSeconds: 20
fileCheckFrequency: 5s
${taints === undefined || taints.length === 0 ? '' : `registerWithTaints:\n${taints.map((t) => `  - { key: ${t.key}, value: "${t.value ?? ''}", effect: ${t.effect} }\n`).join('')}`}`;
}

/** cgroupProcs lists the PIDs in the kubelet's cgroup tree (any process of a pod of this node). */
function cgroupProcs(cgroupRoot: string): number[] {
  const pids = new Set<number>();
  const walk = (path: string): void => {
    if (!existsSync(path)) return;
    for (const e of readdirSync(path, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(path, e.name));
      else if (e.name === 'cgroup.procs')
        for (const l of readFileSync(join(path, e.name), 'utf8').split('\n')) if (l !== '') pids.add(Number(l));
    }
  };
  walk(join('/sys/fs/cgroup/pids', cgroupRoot));
  return [...pids];
}

/** freezerState is the cgroup v1 freezer's state file of the kubelet's cgroup root. */
function freezerState(cgroupRoot: string): string {
  return join('/sys/fs/cgroup/freezer', cgroupRoot, 'freezer.state');
}

/** setFrozen freezes or thaws the whole tree below the kubelet's cgroup root (v1 freezes descendants too). */
function setFrozen(cgroupRoot: string, frozen: boolean): void {
  const file = freezerState(cgroupRoot);
  if (!existsSync(file)) {
    if (frozen) throw new Error(`freezePods: no cgroup v1 freezer at ${file}`);
    return;
  }
  writeFileSync(file, frozen ? 'FROZEN' : 'THAWED');
}

/** shimPids lists containerd-shim processes serving this node's containerd (they outlive it). */
function shimPids(socket: string): number[] {
  const out: number[] = [];
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0');
      if ((cmd[0] ?? '').endsWith('containerd-shim-runc-v2') && cmd.includes(socket)) out.push(Number(p));
    } catch {
      /* gone */
    }
  }
  return out;
}

function killAll(pids: readonly number[]): void {
  for (const pid of pids)
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
}

/**
 * teardownNode cleans up a node folder after its processes were stopped (or died): kills any
 * container process left in the kubelet's cgroups and any shim of its containerd, then undoes the
 * ledger. Returns what could not be undone.
 */
export async function teardownNode(dir: string): Promise<string[]> {
  const socket = join(dir, 'containerd.sock');
  // A frozen process takes its SIGKILL only once thawed (a node-loss test froze the pods).
  setFrozen(nodeNames(dir).cgroupRoot, false);
  for (let i = 0; i < 20; i++) {
    const left = [...cgroupProcs(nodeNames(dir).cgroupRoot), ...shimPids(socket)];
    if (left.length === 0) break;
    killAll(left);
    await sleep(100);
  }
  return undoHostChanges(dir);
}

async function waitReady(kc: KubeConfig, name: string, kubelet: ManagedProcess, timeoutMs: number): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const node = await core.readNode({ name }).catch(() => undefined);
    if (node?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true) return;
    if (!kubelet.isRunning()) throw new Error(`kubelet exited:\n${tailLog(kubelet.logFile, 40)}`);
    if (performance.now() > deadline)
      throw new Error(
        `node ${name} not Ready after ${timeoutMs} ms: ${JSON.stringify(node?.status?.conditions)}\n${tailLog(kubelet.logFile, 40)}`,
      );
    await sleep(250);
  }
}

/** startNode starts containerd and the kubelet beside plane and waits until the Node is Ready. */
export async function startNode(plane: ControlPlane, opts: NodeOptions = {}): Promise<RealNode> {
  const name = opts.name ?? 'fencepost-node';
  const dir = join(plane.dir, opts.folder ?? 'node');
  const pidFile = opts.pidFile ?? join(plane.dir, 'pids');
  // A crashed run's node in the same folder: undo what it left before starting afresh.
  const leftover = await teardownNode(dir);
  if (leftover.length > 0)
    throw new Error(`startNode: could not undo a previous node's changes: ${leftover.join('; ')}`);
  rmSync(dir, { recursive: true, force: true });
  for (const d of ['containerd', 'cni/net.d', 'cni/ipam', 'kubelet', 'pod-logs'])
    mkdirSync(join(dir, d), { recursive: true });
  const ip = hostAddress();
  const assets = { runc: findBinary('runc'), cni: findBinary('cni') };
  const apiPort = plane.apiServer.port;
  const changes = new HostChanges(dir);
  const names = nodeNames(dir);
  const { bridge, gateway, chain } = names;

  // Host changes, each recorded before it is made.
  changes.sharedDir('/run/containerd');
  changes.mountsUnder(dir);
  changes.cgroup(names.cgroupRoot);
  changes.recordSysctls(KUBELET_SYSCTLS);
  changes.snapshotIptables();
  changes.bridge(bridge, `${gateway}/24`);
  changes.sysctl('net.ipv4.ip_forward', '1');
  changes.sysctl(`net.ipv4.conf.${bridge}.route_localnet`, '1');
  changes.iptables(['-t', 'nat', '-N', chain]);
  changes.iptables(['-t', 'nat', '-A', 'PREROUTING', '-i', bridge, '-j', chain]);
  changes.iptables([
    '-t',
    'nat',
    '-A',
    chain,
    '-d',
    `${SERVICE_HOST}/32`,
    '-p',
    'tcp',
    '--dport',
    '443',
    '-j',
    'DNAT',
    '--to-destination',
    `127.0.0.1:${apiPort}`,
  ]);

  writeFileSync(join(dir, 'containerd.toml'), containerdConfig(dir, assets));
  mkdirSync(registryConfigDir(dir), { recursive: true });
  for (const host of opts.plainHttpRegistries ?? []) writePlainHttpRegistry(dir, host);
  writeFileSync(join(dir, 'cni/net.d/10-fencepost.conflist'), cniConfig(dir, names));
  const kubeletPort = await freePort();
  writeFileSync(join(dir, 'kubelet.yaml'), kubeletConfig(dir, names, plane.pki.caCert, kubeletPort, opts.taints));
  const env = { ...process.env, PATH: `${join(findBinary('containerd'), '..')}:${process.env['PATH'] ?? ''}` };
  const socket = join(dir, 'containerd.sock');

  const containerd = spawnManaged('containerd', findBinary('containerd'), {
    args: ['--config', join(dir, 'containerd.toml'), '--log-level', 'info'],
    logFile: join(dir, 'containerd.log'),
    pidFile,
    env,
  });
  let kubelet: ManagedProcess | undefined;
  const ctr = (args: readonly string[]): string =>
    sh(findBinary('ctr'), ['--address', socket, '-n', 'k8s.io', ...args]);
  const startKubelet = async (): Promise<void> => {
    kubelet = spawnManaged('kubelet', findBinary('kubelet'), {
      args: [
        `--config=${join(dir, 'kubelet.yaml')}`,
        `--kubeconfig=${plane.kubeconfigPath}`,
        `--root-dir=${join(dir, 'kubelet')}`,
        `--cert-dir=${join(dir, 'kubelet', 'pki')}`,
        `--hostname-override=${name}`,
        `--node-ip=${ip}`,
        '--v=1',
      ],
      logFile: join(dir, 'kubelet.log'),
      pidFile,
      env,
    });
    await waitReady(plane.kubeConfig(), name, kubelet, 120_000);
  };
  const stop = async (): Promise<void> => {
    if (kubelet !== undefined) await kubelet.stop(10_000);
    // Frozen containers would not die, and crictl would wait on them.
    setFrozen(names.cgroupRoot, false);
    if (containerd.isRunning()) {
      // Every pod sandbox down (its containers killed, its network torn down by the CNI plugins).
      spawnSync(findBinary('crictl'), ['--runtime-endpoint', `unix://${socket}`, 'rmp', '-fa'], { timeout: 60_000 });
      await containerd.stop(10_000);
    }
    const problems = await teardownNode(dir);
    if (problems.length > 0) throw new Error(`node teardown left: ${problems.join('; ')}`);
  };
  const started = performance.now();
  try {
    // containerd serves its socket once every plugin has loaded: seconds, more on a loaded machine.
    for (;;) {
      const probe = existsSync(socket)
        ? spawnSync(findBinary('ctr'), ['--address', socket, 'version'], { encoding: 'utf8', timeout: 10_000 })
        : undefined;
      if (probe?.status === 0) break;
      if (!containerd.isRunning() || performance.now() - started > 90_000)
        throw new Error(
          `containerd did not start (${probe === undefined ? 'no socket' : probe.stderr.trim()}):\n${tailLog(containerd.logFile)}`,
        );
      await sleep(100);
    }
    process.stderr.write(`[node] containerd serving after ${Math.round(performance.now() - started)} ms\n`);
    const imported = performance.now();
    importImage(ctr, pauseArchive(dir), [PAUSE_IMAGE, ...(opts.pauseAs ?? [])]);
    for (const image of opts.images ?? []) importImage(ctr, image.archive, image.names);
    for (const [i, image] of (opts.hostImages ?? []).entries())
      importImage(ctr, hostImageArchive(dir, i, image), image.names);
    const kubeletAt = performance.now();
    await startKubelet();
    process.stderr.write(
      `[node] ${name} Ready ${Math.round(performance.now() - started)} ms after containerd's start ` +
        `(images ${Math.round(kubeletAt - imported)} ms, kubelet to Ready ${Math.round(performance.now() - kubeletAt)} ms)\n`,
    );
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
  return {
    ip,
    names,
    containerd,
    kubelet: () => {
      if (kubelet === undefined) throw new Error('kubelet not started');
      return kubelet;
    },
    ...attachNode(name, dir, pidFile),
    exposeLoopback(port) {
      changes.iptables([
        '-t',
        'nat',
        '-A',
        chain,
        '-d',
        `${gateway}/32`,
        '-p',
        'tcp',
        '--dport',
        String(port),
        '-j',
        'DNAT',
        '--to-destination',
        `127.0.0.1:${port}`,
      ]);
      // ... and from 127.0.0.1: a loopback-only server may refuse other sources (redis-server's
      // protected mode closes the connection of a client that is not local).
      changes.iptables([
        '-t',
        'nat',
        '-A',
        'INPUT',
        '-i',
        bridge,
        '-d',
        '127.0.0.1/32',
        '-p',
        'tcp',
        '--dport',
        String(port),
        '-j',
        'SNAT',
        '--to-source',
        '127.0.0.1',
      ]);
      return `${gateway}:${port}`;
    },
    freezePods: () => {
      setFrozen(names.cgroupRoot, true);
    },
    thawPods: () => {
      setFrozen(names.cgroupRoot, false);
    },
    async stopKubelet() {
      await kubelet?.stop(10_000);
    },
    startKubelet,
    stop,
  };
}

/**
 * NodeProbes is what a test asks of a node's runtime (its containers, their events, a pod's
 * loopback): all of it by the node's containerd socket, so a process other than the one that
 * started the node (a test file sharing the run's cluster) can ask too.
 */
export type NodeProbes = Pick<RealNode, 'name' | 'dir' | 'crictl' | 'events' | 'podGet' | 'containerPid'>;

/** attachNode is the probes of the node named name whose folder is dir (its recorders' processes go to pidFile). */
export function attachNode(name: string, dir: string, pidFile: string): NodeProbes {
  const socket = join(dir, 'containerd.sock');
  const ctr = (args: readonly string[]): string =>
    sh(findBinary('ctr'), ['--address', socket, '-n', 'k8s.io', ...args]);
  return {
    name,
    dir,
    crictl: (args) => sh(findBinary('crictl'), ['--runtime-endpoint', `unix://${socket}`, ...args]),
    events: () => recordEvents(socket, dir, pidFile, ctr),
    async podGet(namespace, pod, url) {
      // Asynchronous all the way: the e2e watch asks every agent at once and times each answer, and
      // a synchronous crictl here would run the pods' requests one after another.
      const crictl = (args: readonly string[]): Promise<string> =>
        runAsync(findBinary('crictl'), ['--runtime-endpoint', `unix://${socket}`, ...args]);
      const id = (await crictl(['pods', '-q', '--namespace', namespace, '--name', `^${pod}$`, '--state', 'ready']))
        .split('\n')
        .find((l) => l !== '');
      if (id === undefined) return { status: 0, body: 'no such pod sandbox' };
      let netns: string | undefined;
      try {
        const info = JSON.parse(await crictl(['inspectp', id])) as {
          info?: { runtimeSpec?: { linux?: { namespaces?: { type: string; path?: string }[] } } };
        };
        netns = info.info?.runtimeSpec?.linux?.namespaces?.find((n) => n.type === 'network')?.path;
      } catch {
        return { status: 0, body: `crictl inspectp ${id} did not answer (the sandbox went away)` };
      }
      if (netns === undefined) return { status: 0, body: 'pod sandbox has no network namespace' };
      const r = await runAsync('nsenter', [`--net=${netns}`, 'curl', '-s', '-m', '2', '-w', '\n%{http_code}', url]);
      const at = r.lastIndexOf('\n');
      return { status: Number(r.slice(at + 1)) || 0, body: r.slice(0, Math.max(at, 0)) };
    },
    containerPid(namespace, pod, container) {
      const crictl = (args: readonly string[]): string =>
        sh(findBinary('crictl'), ['--runtime-endpoint', `unix://${socket}`, ...args]);
      const sandbox = crictl(['pods', '-q', '--namespace', namespace, '--name', `^${pod}$`, '--state', 'ready'])
        .split('\n')
        .find((l) => l !== '');
      if (sandbox === undefined) return undefined;
      const id = crictl(['ps', '-q', '--pod', sandbox, '--name', `^${container}$`, '--state', 'running'])
        .split('\n')
        .find((l) => l !== '');
      if (id === undefined) return undefined;
      const pid = (JSON.parse(crictl(['inspect', id])) as { info?: { pid?: number } }).info?.pid;
      return pid !== undefined && pid > 0 ? pid : undefined;
    },
  };
}

interface CriLabels {
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
}

/** criLabels names a containerd container by the kubelet's labels (the sandbox is "POD"). */
function criLabels(ctr: (args: readonly string[]) => string, id: string): CriLabels | undefined {
  try {
    const info = JSON.parse(ctr(['containers', 'info', id])) as { Labels?: Record<string, string> };
    const l = info.Labels ?? {};
    return {
      namespace: l['io.kubernetes.pod.namespace'] ?? '',
      pod: l['io.kubernetes.pod.name'] ?? '',
      container: l['io.kubernetes.container.name'] ?? 'POD',
    };
  } catch {
    return undefined;
  }
}

/** recordEvents follows `ctr events` and keeps the task starts and exits of pods' containers. */
function recordEvents(
  socket: string,
  dir: string,
  pidFile: string,
  ctr: (args: readonly string[]) => string,
): NodeEvents {
  const events: NodeEvent[] = [];
  const names = new Map<string, CriLabels | undefined>();
  const proc = spawnManaged('ctr-events', findBinary('ctr'), {
    args: ['--address', socket, 'events'],
    logFile: join(dir, 'ctr-events.log'),
    pidFile,
    pipeStdio: true,
  });
  let buffered = '';
  proc.stdout?.setEncoding('utf8');
  proc.stdout?.on('data', (chunk: string) => {
    buffered += chunk;
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      // 2026-12-06 23:20:00.123456789 +0000 UTC k8s.io /tasks/exit {"container_id":…}
      const m = /^(\S+ \S+) \+0000 UTC k8s\.io \/tasks\/(start|exit) (\{.*\})$/.exec(line);
      if (m === null) continue;
      const body = JSON.parse(m[3] ?? '{}') as { container_id?: string; id?: string; exit_status?: number };
      const id = body.container_id ?? '';
      // An exec's exit carries the exec id; only the container's own task (id equal or absent) counts.
      if (body.id !== undefined && body.id !== '' && body.id !== id) continue;
      if (!names.has(id)) names.set(id, criLabels(ctr, id));
      const who = names.get(id);
      if (who === undefined) continue;
      events.push({
        at: Date.parse(`${(m[1] ?? '').replace(' ', 'T').slice(0, 23)}Z`),
        what: m[2] === 'start' ? 'start' : 'exit',
        ...who,
        // encoding/json leaves out a zero exit status
        ...(m[2] === 'exit' ? { exitStatus: body.exit_status ?? 0 } : {}),
      });
    }
  });
  return { list: () => [...events], stop: () => proc.stop(2000) };
}

/**
 * importImage imports an OCI archive into the node's k8s.io namespace under names (normalized as
 * the kubelet asks for them: `fencepost:e2e` is docker.io/library/fencepost:e2e, `curlimages/curl:8`
 * docker.io/curlimages/curl:8).
 */
function importImage(ctr: (args: readonly string[]) => string, archive: string, names: readonly string[]): void {
  const list = (): string[] => ctr(['images', 'ls', '-q']).split('\n');
  const before = new Set(list());
  ctr(['images', 'import', '--no-unpack', '--all-platforms', archive]);
  const source = list().find((n) => n !== '' && !before.has(n));
  if (source === undefined) throw new Error(`ctr images import ${archive}: no new image name came out of the archive`);
  for (const name of names) {
    const first = name.split('/')[0] ?? '';
    // Docker Hub's names are short: `fencepost:e2e` is docker.io/library/…, `curlimages/curl:8` docker.io/….
    const full = !name.includes('/')
      ? `docker.io/library/${name}`
      : /[.:]/.test(first) || first === 'localhost'
        ? name
        : `docker.io/${name}`;
    if (full !== source) ctr(['images', 'tag', '--force', source, full]);
  }
}
