/**
 * crun-container.ts — one container of the fencepost image run with crun inside a pod sandbox
 * (sandbox.ts), looking to its caller like any other testbed process (a ManagedProcess).
 *
 * `crun run` stays in the foreground with the container's stdout and stderr in logFile, so its
 * exit is the container's exit (crun returns the container's code). stop() sends SIGTERM to crun,
 * which forwards it to the container's PID 1 — the kubelet's SIGTERM; after the grace period,
 * `crun kill ID KILL` and `crun delete -f ID`. SIGKILL is never sent to crun itself (it would
 * orphan the container): signal() sends SIGSTOP, SIGCONT and SIGKILL to the container's own PID,
 * read from `crun state`. The state root (crun --root) is the caller's, never /run/crun; it is
 * recorded in pidFile so that reapStale can delete what a crashed run left.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  dockerArch,
  imageConfigFromRuntimeSpec,
  seccompFromDocker,
  type DockerSeccompProfile,
  type ImageConfig,
  type OciRuntimeConfig,
  type OciSeccomp,
} from '../image/oci-config.ts';
import { raceTimeout, recordCrunRoot, recordPid, spawnManaged, type ManagedProcess } from '../testbed/processes.ts';
import type { Sandbox } from './sandbox.ts';

/** DEFAULT_SECCOMP_PROFILE is containers-common's default profile (Docker format), the RuntimeDefault of CRI-O and Podman. */
export const DEFAULT_SECCOMP_PROFILE = '/usr/share/containers/seccomp.json';

/**
 * runtimeDefaultSeccomp is the chart's `seccompProfile: RuntimeDefault` for a process without
 * capabilities on this machine's architecture: containers-common's profile, converted.
 */
export function runtimeDefaultSeccomp(file = DEFAULT_SECCOMP_PROFILE): OciSeccomp {
  return seccompFromDocker(JSON.parse(readFileSync(file, 'utf8')) as DockerSeccompProfile, dockerArch(process.arch));
}

/** CrunContainerOptions configures spawnCrunContainer. */
export interface CrunContainerOptions {
  /** id is crun's container id: unique within stateRoot. */
  readonly id: string;
  readonly sandbox: Sandbox;
  /** stateRoot is crun's --root (created, owned by the sandbox's host uid). */
  readonly stateRoot: string;
  /** bundle is the directory config.json is written to. */
  readonly bundle: string;
  readonly config: OciRuntimeConfig;
  readonly logFile: string;
  readonly pidFile?: string;
}

/** ensureStateRoot creates crun's state root for containers of sandboxes owned by uid. */
export function ensureStateRoot(stateRoot: string, uid: number, pidFile?: string): void {
  if (existsSync(stateRoot)) return;
  mkdirSync(stateRoot, { recursive: true, mode: 0o700 });
  if (process.getuid?.() === 0) chownSync(stateRoot, uid, uid);
  if (pidFile !== undefined) recordCrunRoot(pidFile, stateRoot);
}

/** spawnCrunContainer writes the bundle's config.json and runs the container in the foreground. */
export function spawnCrunContainer(name: string, o: CrunContainerOptions): ManagedProcess {
  ensureStateRoot(o.stateRoot, o.sandbox.hostUid, o.pidFile);
  mkdirSync(o.bundle, { recursive: true, mode: 0o755 });
  writeFileSync(join(o.bundle, 'config.json'), JSON.stringify(o.config, null, 1), { mode: 0o644 });
  const [bin, ...prefix] = o.sandbox.runtime();
  const crun = (args: readonly string[]): string[] => ['--root', o.stateRoot, ...args];
  const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', XDG_RUNTIME_DIR: o.stateRoot };
  const proc = spawnManaged(name, bin ?? 'crun', {
    args: [...prefix, 'crun', ...crun(['--cgroup-manager=disabled', 'run', '-b', o.bundle, o.id])],
    logFile: o.logFile,
    env,
  });
  if (o.pidFile !== undefined) recordPid(o.pidFile, proc.pid, 'crun');
  /** containerPid is the container's PID 1 as the host sees it, while crun knows it. */
  const containerPid = (): number | undefined => {
    try {
      const state = JSON.parse(
        execFileSync('crun', crun(['state', o.id]), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], env }),
      ) as { pid?: number; status?: string };
      return state.status === 'stopped' ? undefined : state.pid;
    } catch {
      return undefined;
    }
  };
  const quietly = (args: readonly string[]): void => {
    try {
      execFileSync('crun', crun(args), { stdio: 'ignore', env });
    } catch {
      /* already gone */
    }
  };
  return {
    name: proc.name,
    pid: proc.pid,
    exited: proc.exited,
    logFile: proc.logFile,
    stdin: null,
    stdout: null,
    isRunning: () => proc.isRunning(),
    signal(sig) {
      if (!proc.isRunning()) return;
      const pid = containerPid();
      if (pid === undefined) return;
      try {
        process.kill(pid, sig);
      } catch {
        /* exited meanwhile */
      }
    },
    async stop(graceMs = 5000) {
      if (!proc.isRunning()) return;
      const pid = containerPid();
      if (pid !== undefined) {
        try {
          process.kill(pid, 'SIGCONT'); // a paused container cannot act on SIGTERM
        } catch {
          /* exited meanwhile */
        }
      }
      proc.signal('SIGTERM'); // crun forwards it to the container
      if (
        await raceTimeout(
          proc.exited.then(() => true),
          graceMs,
          false,
        )
      )
        return;
      quietly(['kill', o.id, 'KILL']);
      if (
        !(await raceTimeout(
          proc.exited.then(() => true),
          5000,
          false,
        ))
      ) {
        quietly(['delete', '-f', o.id]);
        await proc.stop(2000);
      }
      quietly(['delete', '-f', o.id]);
    },
  };
}

/** ImageUnderTest is an unpacked image: its root and its config (how ensureImageRootfs gives it). */
export interface ImageUnderTest {
  readonly rootfs: string;
  readonly config: ImageConfig;
}

/**
 * imageFromEnv is the image named by FENCEPOST_IMAGE_ROOTFS (an unpacked root) and its config:
 * FENCEPOST_IMAGE_CONFIG (a JSON file, an ImageConfig or an OCI config blob with `config`), else
 * the image-config.json (the config blob, as ensureImageRootfs keeps it) or the config.json umoci
 * wrote beside the root; undefined when FENCEPOST_IMAGE_ROOTFS is unset.
 */
export function imageFromEnv(env: NodeJS.ProcessEnv = process.env): ImageUnderTest | undefined {
  const rootfs = env['FENCEPOST_IMAGE_ROOTFS'];
  if (rootfs === undefined || rootfs === '') return undefined;
  const configFile = env['FENCEPOST_IMAGE_CONFIG'];
  if (configFile !== undefined && configFile !== '') {
    const raw = JSON.parse(readFileSync(configFile, 'utf8')) as ImageConfig & { config?: ImageConfig };
    return { rootfs, config: raw.config ?? raw };
  }
  const blob = join(dirname(rootfs), 'image-config.json'); // ensureImageRootfs's layout
  if (existsSync(blob)) {
    const raw = JSON.parse(readFileSync(blob, 'utf8')) as { config?: ImageConfig };
    return { rootfs, config: raw.config ?? {} };
  }
  const umoci = join(dirname(rootfs), 'config.json');
  if (existsSync(umoci))
    return {
      rootfs,
      config: imageConfigFromRuntimeSpec(
        JSON.parse(readFileSync(umoci, 'utf8')) as Parameters<typeof imageConfigFromRuntimeSpec>[0],
      ),
    };
  throw new Error(`FENCEPOST_IMAGE_ROOTFS=${rootfs}: set FENCEPOST_IMAGE_CONFIG too (no umoci config.json beside it)`);
}
