/**
 * oci-config.ts — the OCI runtime configuration (a bundle's config.json) that runs one container
 * of the fencepost image the way the chart's pod asks for: built by pure functions from the
 * image's config and a container's overrides, with no I/O, so that unit tests pin every field.
 *
 * Defaults mirror charts/fencepost/values.yaml (podSecurityContext and securityContext):
 * runAsUser/runAsGroup 65532 with fsGroup 65532 as a supplementary group, runAsNonRoot,
 * readOnlyRootFilesystem, capabilities drop ALL, allowPrivilegeEscalation false (noNewPrivileges),
 * seccomp RuntimeDefault (the caller passes the converted containers-common profile, see
 * seccompFromDocker, or 'unconfined'). The process gets its own pid, ipc, uts and mount
 * namespaces (one pid namespace per container, the Kubernetes default: the entrypoint is PID 1),
 * joins the pod's network namespace by path (or gets a new one), and no terminal. No /tmp is
 * mounted: the chart mounts no emptyDir, so a write to the root must fail here as it would there.
 */

/**
 * ImageConfig is the part of an image's OCI config blob (`config` in
 * application/vnd.oci.image.config.v1+json) that says how to run it.
 */
export interface ImageConfig {
  readonly Entrypoint?: readonly string[];
  readonly Cmd?: readonly string[];
  readonly Env?: readonly string[];
  readonly WorkingDir?: string;
  readonly User?: string;
  readonly Labels?: Readonly<Record<string, string>>;
}

/** OciMount is one entry of config.json's mounts. */
export interface OciMount {
  readonly destination: string;
  readonly type: string;
  readonly source: string;
  readonly options?: readonly string[];
}

/** OciIdMapping maps a range of ids inside a user namespace to ids outside it. */
export interface OciIdMapping {
  readonly containerID: number;
  readonly hostID: number;
  readonly size: number;
}

/** OciNamespace is one of linux.namespaces: a new namespace, or the one at path. */
export interface OciNamespace {
  readonly type: 'pid' | 'network' | 'ipc' | 'uts' | 'mount' | 'user' | 'cgroup';
  readonly path?: string;
}

/** OciSeccompArg is one argument condition of a seccomp rule. */
export interface OciSeccompArg {
  readonly index: number;
  readonly value: number;
  readonly valueTwo?: number;
  readonly op: string;
}

/** OciSeccompRule is one of linux.seccomp.syscalls. */
export interface OciSeccompRule {
  readonly names: readonly string[];
  readonly action: string;
  readonly args?: readonly OciSeccompArg[];
  readonly errnoRet?: number;
}

/** OciSeccomp is linux.seccomp. */
export interface OciSeccomp {
  readonly defaultAction: string;
  readonly defaultErrnoRet?: number;
  readonly architectures: readonly string[];
  readonly syscalls: readonly OciSeccompRule[];
}

/** OciCapabilities are the five capability sets of a process. */
export interface OciCapabilities {
  readonly bounding: readonly string[];
  readonly effective: readonly string[];
  readonly inheritable: readonly string[];
  readonly permitted: readonly string[];
  readonly ambient: readonly string[];
}

/** OciRuntimeConfig is the subset of the OCI runtime spec (config.json) that ociConfig writes. */
export interface OciRuntimeConfig {
  readonly ociVersion: string;
  readonly process: {
    readonly terminal: boolean;
    readonly user: { readonly uid: number; readonly gid: number; readonly additionalGids?: readonly number[] };
    readonly args: readonly string[];
    readonly env: readonly string[];
    readonly cwd: string;
    readonly capabilities: OciCapabilities;
    readonly noNewPrivileges: boolean;
  };
  readonly root: { readonly path: string; readonly readonly: boolean };
  readonly hostname: string;
  readonly mounts: readonly OciMount[];
  readonly linux: {
    readonly namespaces: readonly OciNamespace[];
    readonly uidMappings?: readonly OciIdMapping[];
    readonly gidMappings?: readonly OciIdMapping[];
    readonly maskedPaths: readonly string[];
    readonly readonlyPaths: readonly string[];
    readonly seccomp?: OciSeccomp;
  };
}

/** ContainerOverrides is what a pod's container spec and the runtime add to the image's config. */
export interface ContainerOverrides {
  /** rootfs is root.path: the unpacked image root, absolute (shared read-only by every container). */
  readonly rootfs: string;
  /** command replaces the image's Entrypoint and drops its Cmd (Kubernetes `command`). */
  readonly command?: readonly string[];
  /** args replaces the image's Cmd (Kubernetes `args`). */
  readonly args?: readonly string[];
  /** env is added to the image's Env; a name already there takes the new value. */
  readonly env?: Readonly<Record<string, string>>;
  /** workingDir replaces the image's WorkingDir (default `/`). */
  readonly workingDir?: string;
  /** mounts are added after the standard ones (e.g. the ServiceAccount directory, read-only). */
  readonly mounts?: readonly OciMount[];
  /** netns is the path of the network namespace to join (the pod sandbox's); absent: a new one. */
  readonly netns?: string;
  /**
   * userns gives the container a new user namespace with these mappings (rootless: the runtime
   * runs inside the sandbox's user namespace, and the container's ids map onto the sandbox's).
   * Absent: no user namespace. /sys is then a bind mount, since a nested user namespace may not
   * mount sysfs for a network namespace it does not own.
   */
  readonly userns?: { readonly uidMappings: readonly OciIdMapping[]; readonly gidMappings: readonly OciIdMapping[] };
  /** uid is runAsUser (default 65532); gid runAsGroup (default 65532); fsGroup a supplementary group (default 65532). */
  readonly uid?: number;
  readonly gid?: number;
  readonly fsGroup?: number;
  /** runAsNonRoot (default true): ociConfig throws when the process would run as uid 0, as the kubelet refuses it. */
  readonly runAsNonRoot?: boolean;
  /** readonlyRoot is readOnlyRootFilesystem (default true). */
  readonly readonlyRoot?: boolean;
  /** capabilities the process keeps (default none: drop ALL). */
  readonly capabilities?: readonly string[];
  /** allowPrivilegeEscalation (default false: noNewPrivileges). */
  readonly allowPrivilegeEscalation?: boolean;
  /** seccomp is the filter (RuntimeDefault: seccompFromDocker of the containers-common profile) or 'unconfined'. */
  readonly seccomp: OciSeccomp | 'unconfined';
  /** hostname of the container (default `fencepost`; Kubernetes uses the pod's name). */
  readonly hostname?: string;
}

/** CHART_UID is the chart's runAsUser, runAsGroup and fsGroup (distroless `nonroot`). */
export const CHART_UID = 65532;

/** MASKED_PATHS and READONLY_PATHS are the runtime defaults of containerd, CRI-O and Docker. */
const MASKED_PATHS = [
  '/proc/acpi',
  '/proc/asound',
  '/proc/kcore',
  '/proc/keys',
  '/proc/latency_stats',
  '/proc/timer_list',
  '/proc/timer_stats',
  '/proc/sched_debug',
  '/proc/scsi',
  '/sys/firmware',
];
const READONLY_PATHS = ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'];

/**
 * standardMounts are /proc, /dev (tmpfs), /dev/pts, /dev/shm, /dev/mqueue and a read-only /sys —
 * what every container gets. Rootless (a nested user namespace): /sys is a read-only bind mount
 * of the host's, and /dev/pts has no gid= option (group 5 is not mapped).
 */
export function standardMounts(rootless: boolean): OciMount[] {
  return [
    { destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
    {
      destination: '/dev',
      type: 'tmpfs',
      source: 'tmpfs',
      options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'],
    },
    {
      destination: '/dev/pts',
      type: 'devpts',
      source: 'devpts',
      options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620', ...(rootless ? [] : ['gid=5'])],
    },
    {
      destination: '/dev/shm',
      type: 'tmpfs',
      source: 'shm',
      options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'],
    },
    { destination: '/dev/mqueue', type: 'mqueue', source: 'mqueue', options: ['nosuid', 'noexec', 'nodev'] },
    rootless
      ? { destination: '/sys', type: 'none', source: '/sys', options: ['rbind', 'nosuid', 'noexec', 'nodev', 'ro'] }
      : { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
  ];
}

/**
 * mergeEnv returns base (NAME=value entries) with extra set: a name already present keeps its
 * place and takes the new value, new names are appended in extra's order.
 */
export function mergeEnv(base: readonly string[], extra: Readonly<Record<string, string>>): string[] {
  const out = base.map((e) => {
    const name = e.slice(0, Math.max(0, e.indexOf('=')));
    return Object.hasOwn(extra, name) ? `${name}=${extra[name] ?? ''}` : e;
  });
  const present = new Set(base.map((e) => e.slice(0, Math.max(0, e.indexOf('=')))));
  for (const [k, v] of Object.entries(extra)) if (!present.has(k)) out.push(`${k}=${v}`);
  return out;
}

/**
 * processArgs applies Kubernetes' rule: command replaces Entrypoint (and the image's Cmd is then
 * ignored), args replaces Cmd. Throws when nothing is left to run.
 */
export function processArgs(image: ImageConfig, command?: readonly string[], args?: readonly string[]): string[] {
  const entry = command ?? image.Entrypoint ?? [];
  const rest = args ?? (command !== undefined ? [] : (image.Cmd ?? []));
  const out = [...entry, ...rest];
  if (out.length === 0) throw new Error('ociConfig: the image has no Entrypoint or Cmd and no command was given');
  return out;
}

/**
 * ociConfig builds a bundle's config.json for one container of the image. Pure: the same input
 * gives the same output, and nothing is read from the machine.
 */
export function ociConfig(image: ImageConfig, o: ContainerOverrides): OciRuntimeConfig {
  const uid = o.uid ?? CHART_UID;
  const gid = o.gid ?? CHART_UID;
  const fsGroup = o.fsGroup ?? CHART_UID;
  if ((o.runAsNonRoot ?? true) && uid === 0)
    throw new Error('ociConfig: runAsNonRoot is set but the container would run as uid 0');
  const caps = [...(o.capabilities ?? [])];
  const rootless = o.userns !== undefined;
  const namespaces: OciNamespace[] = [
    { type: 'pid' },
    o.netns !== undefined ? { type: 'network', path: o.netns } : { type: 'network' },
    { type: 'ipc' },
    { type: 'uts' },
    { type: 'mount' },
    ...(rootless ? [{ type: 'user' } as const] : []),
  ];
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: { uid, gid, ...(fsGroup !== gid ? { additionalGids: [fsGroup] } : {}) },
      args: processArgs(image, o.command, o.args),
      env: mergeEnv(image.Env ?? [], o.env ?? {}),
      cwd: o.workingDir ?? (image.WorkingDir !== undefined && image.WorkingDir !== '' ? image.WorkingDir : '/'),
      capabilities: { bounding: caps, effective: caps, inheritable: [], permitted: caps, ambient: [] },
      noNewPrivileges: !(o.allowPrivilegeEscalation ?? false),
    },
    root: { path: o.rootfs, readonly: o.readonlyRoot ?? true },
    hostname: o.hostname ?? 'fencepost',
    mounts: [...standardMounts(rootless), ...(o.mounts ?? [])],
    linux: {
      namespaces,
      ...(o.userns !== undefined ? { uidMappings: o.userns.uidMappings, gidMappings: o.userns.gidMappings } : {}),
      maskedPaths: MASKED_PATHS,
      readonlyPaths: READONLY_PATHS,
      ...(o.seccomp !== 'unconfined' ? { seccomp: o.seccomp } : {}),
    },
  };
}

/** DockerSeccompProfile is the Docker/containers-common seccomp.json format (/usr/share/containers/seccomp.json). */
export interface DockerSeccompProfile {
  readonly defaultAction: string;
  readonly defaultErrnoRet?: number;
  readonly archMap?: readonly { readonly architecture: string; readonly subArchitectures?: readonly string[] }[];
  readonly syscalls: readonly {
    readonly names: readonly string[];
    readonly action: string;
    readonly args?: readonly OciSeccompArg[] | null;
    readonly errnoRet?: number;
    readonly includes?: { readonly arches?: readonly string[]; readonly caps?: readonly string[] };
    readonly excludes?: { readonly arches?: readonly string[]; readonly caps?: readonly string[] };
  }[];
}

/** SECCOMP_ARCH maps a Docker profile's architecture names to libseccomp's. */
const SECCOMP_ARCH: Readonly<Record<string, string>> = { amd64: 'SCMP_ARCH_X86_64', arm64: 'SCMP_ARCH_AARCH64' };

/**
 * seccompFromDocker converts a Docker-format profile to linux.seccomp for one architecture
 * (`amd64`, `arm64`) and a process holding `caps`, as Docker and Podman do when they apply it:
 * a rule is kept when its includes match (every included cap held, the arch listed) and its
 * excludes do not (no excluded cap held, the arch not listed). With no capabilities, the rules
 * that grant syscalls to privileged processes drop out and their ERRNO twins stay.
 */
export function seccompFromDocker(
  profile: DockerSeccompProfile,
  arch: string,
  caps: readonly string[] = [],
): OciSeccomp {
  const main = SECCOMP_ARCH[arch];
  if (main === undefined) throw new Error(`seccompFromDocker: unknown architecture ${arch}`);
  const held = new Set(caps);
  const entry = (profile.archMap ?? []).find((a) => a.architecture === main);
  const syscalls: OciSeccompRule[] = [];
  for (const r of profile.syscalls) {
    const inc = r.includes ?? {};
    const exc = r.excludes ?? {};
    if (inc.arches !== undefined && inc.arches.length > 0 && !inc.arches.includes(arch)) continue;
    if (inc.caps !== undefined && !inc.caps.every((c) => held.has(c))) continue;
    if (exc.arches?.includes(arch) === true) continue;
    if (exc.caps !== undefined && exc.caps.some((c) => held.has(c))) continue;
    syscalls.push({
      names: [...r.names],
      action: r.action,
      ...(r.args !== undefined && r.args !== null && r.args.length > 0 ? { args: r.args } : {}),
      ...(r.errnoRet !== undefined ? { errnoRet: r.errnoRet } : {}),
    });
  }
  return {
    defaultAction: profile.defaultAction,
    ...(profile.defaultErrnoRet !== undefined ? { defaultErrnoRet: profile.defaultErrnoRet } : {}),
    architectures: [main, ...(entry?.subArchitectures ?? [])],
    syscalls,
  };
}

/**
 * imageConfigFromRuntimeSpec reads back an ImageConfig from a runtime config.json as `umoci
 * unpack` writes it (process.args holds Entrypoint and Cmd together, so it becomes Entrypoint).
 */
export function imageConfigFromRuntimeSpec(spec: {
  readonly process?: {
    readonly args?: readonly string[];
    readonly env?: readonly string[];
    readonly cwd?: string;
    readonly user?: { readonly uid?: number; readonly gid?: number };
  };
  readonly annotations?: Readonly<Record<string, string>>;
}): ImageConfig {
  const p = spec.process ?? {};
  return {
    ...(p.args !== undefined ? { Entrypoint: [...p.args] } : {}),
    ...(p.env !== undefined ? { Env: [...p.env] } : {}),
    ...(p.cwd !== undefined ? { WorkingDir: p.cwd } : {}),
    ...(p.user?.uid !== undefined ? { User: `${p.user.uid}:${p.user.gid ?? p.user.uid}` } : {}),
  };
}

/** dockerArch is the Docker/OCI architecture name of a Node `process.arch` (x64 → amd64). */
export function dockerArch(nodeArch: string): string {
  return nodeArch === 'x64' ? 'amd64' : nodeArch;
}
