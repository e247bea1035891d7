/**
 * sandbox.ts — a pod sandbox for containers run with crun: what the kubelet's pause container
 * and CNI give a pod, made from unprivileged namespaces on one machine.
 *
 * - A small holder process (`sleep`) owns a new user, network and mount namespace. As root it
 *   runs as an unprivileged host uid (SANDBOX_UID, 65534) through setpriv, so the containers are
 *   rootless: a container's uid maps to the sandbox's root, which is that host uid.
 * - Its mount namespace covers /sys/fs/cgroup/unified with an empty tmpfs when the machine has
 *   hybrid cgroups (crun 1.8 refuses them: "cgroups in hybrid mode not supported"); on a pure
 *   cgroup v1 or v2 machine nothing is mounted. The containers run with `--cgroup-manager=disabled`.
 * - slirp4netns (as root: /dev/net/tun is 0600 on these machines) gives the pod 10.0.2.100 behind
 *   tap0 with MTU 65520; 10.0.2.2 is the host's 127.0.0.1 (`--disable-host-loopback` is not set),
 *   so host services (API server, redis) are reached there, while the pod's own 127.0.0.1 is its own.
 * - A relay (pod-relay.ts) inside the pod's network namespace makes `forward(P)` work: a host
 *   127.0.0.1:L listener whose connections reach 127.0.0.1:P in the pod.
 *
 * The sandbox is created before any container, because a container's process becomes
 * non-dumpable after its uid change and slirp4netns could then not open its namespaces; the
 * containers join the sandbox's network namespace by path. stop() kills every process it started,
 * by PID; each is recorded in pidFile for reapStale after a crash.
 */
import { execFile } from 'node:child_process';
import { chownSync, lstatSync, mkdirSync, readFileSync, readlinkSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { OciIdMapping } from '../image/oci-config.ts';
import { recordPid, spawnManaged, tailLog, type ManagedProcess } from '../testbed/processes.ts';

const run = promisify(execFile);

/** SANDBOX_UID is the host uid that owns the sandboxes started as root (nobody). */
export const SANDBOX_UID = 65534;
/** HOST_LOOPBACK is the address at which a pod reaches the host's 127.0.0.1 (slirp4netns's gateway). */
export const HOST_LOOPBACK = '10.0.2.2';

const RELAY = resolve(import.meta.dirname, 'pod-relay.ts');
const UNIFIED = '/sys/fs/cgroup/unified';

/** SandboxOptions configures startSandbox. */
export interface SandboxOptions {
  /** name is used in process names and log file names. */
  readonly name: string;
  /** dir holds the relay's socket and the logs; made traversable for the sandbox's host uid. */
  readonly dir: string;
  /** pidFile records the processes started, for reapStale. */
  readonly pidFile?: string;
  /** uid is the sandbox's host uid when running as root (default SANDBOX_UID); as another user, that user. */
  readonly uid?: number;
}

/** Sandbox is a running pod sandbox. */
export interface Sandbox {
  readonly name: string;
  /** pid is the holder process; its namespaces are the pod's. */
  readonly pid: number;
  /** netns is the pod's network namespace, for a container's config (`/proc/PID/ns/net`). */
  readonly netns: string;
  /** hostUid is the host uid the sandbox's root (and so a container's user) maps to. */
  readonly hostUid: number;
  readonly dir: string;
  /** enter is the argv prefix that runs a host program (as the caller) in the pod's network namespace. */
  enter(): string[];
  /** runtime is the argv prefix that runs crun as the sandbox's root in its user and mount namespaces. */
  runtime(): string[];
  /** userns maps container uid and gid to the sandbox's root, for ociConfig's userns. */
  userns(uid: number, gid: number): { uidMappings: OciIdMapping[]; gidMappings: OciIdMapping[] };
  /**
   * bind mounts source at target in the sandbox's mount namespace only (root only), so that crun,
   * running as the sandbox's unprivileged uid, can reach files it has no permission to traverse to.
   */
  bind(source: string, target: string): Promise<void>;
  /**
   * overlay mounts lower (an image root) with a writable upper layer in dir at dir/merged, in the
   * sandbox's mount namespace only (root only), and returns dir/merged: what a runtime's
   * snapshotter gives a pod — crun can create mount points (/var/run/secrets/...) in it without
   * touching the shared image root; the container still sees its root read-only when asked.
   * mountPoints are directories made in the upper layer first, following the image's symlinks
   * (crun 1.8 does not create /var/run/secrets/... when /var/run links to a missing /run).
   */
  overlay(lower: string, dir: string, mountPoints?: readonly string[]): Promise<string>;
  /** forward makes host 127.0.0.1:L reach 127.0.0.1:podPort in the pod; the same L for the same port. */
  forward(podPort: number): Promise<number>;
  /** stop closes the forwards and kills the relay, slirp4netns and the holder. */
  stop(): Promise<void>;
}

/** hybridCgroups: a cgroup2 hierarchy is mounted at /sys/fs/cgroup/unified beside v1 controllers. */
export function hybridCgroups(mountinfo = readFileSync('/proc/self/mountinfo', 'utf8')): boolean {
  return mountinfo.split('\n').some((l) => l.split(' ')[4] === UNIFIED);
}

/**
 * resolveIn resolves path inside the root directory rootfs as the container will see it: each
 * component that is a symlink there is followed (absolute targets from rootfs, at most 40 links).
 */
export function resolveIn(rootfs: string, path: string): string {
  let todo = path.split('/').filter((p) => p !== '' && p !== '.');
  const done: string[] = [];
  for (let links = 0; todo.length > 0;) {
    const [head, ...rest] = todo;
    todo = rest;
    if (head === '..') {
      done.pop();
      continue;
    }
    const at = join(rootfs, ...done, head ?? '');
    let target: string | undefined;
    try {
      if (lstatSync(at).isSymbolicLink()) target = readlinkSync(at);
    } catch {
      /* missing: made as a directory */
    }
    if (target === undefined) {
      done.push(head ?? '');
      continue;
    }
    if (++links > 40) throw new Error(`resolveIn: too many links in ${path}`);
    if (target.startsWith('/')) done.length = 0;
    todo = [...target.split('/').filter((p) => p !== '' && p !== '.'), ...todo];
  }
  return `/${done.join('/')}`;
}

/** waitLine resolves once the process prints `want` on stdout, or rejects when it exits or time runs out. */
async function waitLine(p: ManagedProcess, want: string, ms: number): Promise<void> {
  const out = p.stdout;
  if (out === null) throw new Error(`${p.name}: no stdout pipe`);
  let buffered = '';
  await new Promise<void>((done, fail) => {
    const timer = setTimeout(() => {
      fail(new Error(`${p.name} not ready after ${ms} ms: ${tailLog(p.logFile)}`));
    }, ms);
    out.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      if (buffered.includes(want)) {
        clearTimeout(timer);
        out.resume();
        done();
      }
    });
    void p.exited.then((code) => {
      clearTimeout(timer);
      fail(new Error(`${p.name} exited (${String(code)}): ${tailLog(p.logFile)}`));
    });
  });
}

/** startSandbox creates the pod's namespaces, attaches slirp4netns and starts the relay. */
export async function startSandbox(o: SandboxOptions): Promise<Sandbox> {
  const root = process.getuid?.() === 0;
  const hostUid = root ? (o.uid ?? SANDBOX_UID) : (process.getuid?.() ?? 0);
  mkdirSync(o.dir, { recursive: true, mode: 0o755 });
  if (root) chownSync(o.dir, hostUid, hostUid);
  const log = join(o.dir, 'sandbox.log');
  const started: ManagedProcess[] = [];
  const servers: Server[] = [];
  const stop = async (): Promise<void> => {
    for (const s of servers) s.close();
    for (const p of [...started].reverse()) await p.stop(2000);
  };
  try {
    const hold = `${hybridCgroups() ? `mount -t tmpfs none ${UNIFIED} && ` : ''}echo ready && exec sleep 2147483647`;
    const drop = root ? ['--reuid', String(hostUid), '--regid', String(hostUid), '--clear-groups'] : [];
    const holder = spawnManaged(`${o.name}/sandbox`, root ? 'setpriv' : 'unshare', {
      args: [...drop, ...(root ? ['unshare'] : []), '-Urnm', '--propagation', 'private', 'sh', '-c', hold],
      logFile: log,
      pipeStdio: true,
    });
    started.push(holder);
    await waitLine(holder, 'ready', 10_000);
    if (o.pidFile !== undefined) recordPid(o.pidFile, holder.pid, 'sleep');
    const pid = holder.pid;

    const slirp = spawnManaged(`${o.name}/slirp4netns`, 'slirp4netns', {
      args: ['--configure', '--mtu=65520', '--ready-fd=1', String(pid), 'tap0'],
      logFile: join(o.dir, 'slirp4netns.log'),
      pipeStdio: true,
      ...(o.pidFile !== undefined ? { pidFile: o.pidFile } : {}),
    });
    started.push(slirp);
    await waitLine(slirp, '1', 10_000);

    const enter = (): string[] =>
      root
        ? ['nsenter', '-t', String(pid), '-n', '--']
        : ['nsenter', '-t', String(pid), '-U', '-n', '--preserve-credentials', '--'];
    const socket = join(o.dir, 'relay.sock');
    const [nsenter, ...nsArgs] = enter();
    const relay = spawnManaged(`${o.name}/relay`, nsenter ?? 'nsenter', {
      args: [...nsArgs, process.execPath, RELAY, socket],
      logFile: join(o.dir, 'relay.log'),
      pipeStdio: true,
    });
    started.push(relay);
    if (o.pidFile !== undefined) recordPid(o.pidFile, relay.pid, process.execPath);
    await waitLine(relay, 'ready', 10_000);

    const forwards = new Map<number, Promise<number>>();
    const listen = (podPort: number): Promise<number> => {
      const server = createServer((client: Socket) => {
        const upstream = connect(socket);
        upstream.write(`${podPort}\n`);
        client.pipe(upstream);
        upstream.pipe(client);
        client.on('error', () => upstream.destroy());
        upstream.on('error', () => client.destroy());
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      servers.push(server);
      return new Promise((done, fail) => {
        server.once('error', fail);
        server.listen(0, '127.0.0.1', () => {
          const a = server.address();
          if (a === null || typeof a === 'string') fail(new Error('forward: no port'));
          else done(a.port);
        });
      });
    };

    return {
      name: o.name,
      pid,
      netns: `/proc/${pid}/ns/net`,
      hostUid,
      dir: o.dir,
      enter,
      runtime: () => [
        ...(root ? ['setpriv', ...drop] : []),
        'nsenter',
        '-t',
        String(pid),
        '-U',
        '-m',
        '--preserve-credentials',
        '--',
      ],
      userns: (uid, gid) => ({
        uidMappings: [{ containerID: uid, hostID: 0, size: 1 }],
        gidMappings: [{ containerID: gid, hostID: 0, size: 1 }],
      }),
      async bind(source, target) {
        if (!root) throw new Error('sandbox.bind needs root');
        mkdirSync(target, { recursive: true });
        await run('nsenter', ['-t', String(pid), '-m', '--', 'mount', '--bind', source, target]);
      },
      async overlay(lower, dir, mountPoints = []) {
        if (!root) throw new Error('sandbox.overlay needs root');
        const upper = join(dir, 'upper');
        const work = join(dir, 'work');
        const merged = join(dir, 'merged');
        for (const d of [upper, work, merged]) mkdirSync(d, { recursive: true, mode: 0o755 });
        for (const m of mountPoints) mkdirSync(join(upper, resolveIn(lower, m)), { recursive: true, mode: 0o755 });
        await run('nsenter', [
          '-t',
          String(pid),
          '-m',
          '--',
          'mount',
          '-t',
          'overlay',
          'overlay',
          '-o',
          `lowerdir=${lower},upperdir=${upper},workdir=${work}`,
          merged,
        ]);
        return merged;
      },
      forward(podPort) {
        let p = forwards.get(podPort);
        if (p === undefined) {
          p = listen(podPort);
          forwards.set(podPort, p);
        }
        return p;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
