import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  dockerArch,
  imageConfigFromRuntimeSpec,
  mergeEnv,
  ociConfig,
  processArgs,
  seccompFromDocker,
  type DockerSeccompProfile,
  type ImageConfig,
} from '../../support/image/oci-config.ts';

const IMAGE: ImageConfig = {
  Entrypoint: ['node', '/app/dist/src/cli/main.js'],
  Cmd: ['--help'],
  Env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'NODE_ENV=production'],
  WorkingDir: '/app',
  User: '65532:65532',
};

describe('ociConfig with the chart defaults', () => {
  const c = ociConfig(IMAGE, { rootfs: '/images/x/rootfs', seccomp: 'unconfined' });

  it('runs the image Entrypoint and Cmd as 65532:65532 with fsGroup 65532, in WorkingDir', () => {
    expect(c.process.args).toEqual(['node', '/app/dist/src/cli/main.js', '--help']);
    expect(c.process.user).toEqual({ uid: 65532, gid: 65532 });
    expect(c.process.cwd).toBe('/app');
    expect(c.process.env).toEqual(IMAGE.Env);
  });

  it('keeps no capability, sets noNewPrivileges, a read-only root and no terminal', () => {
    const { bounding, effective, inheritable, permitted, ambient } = c.process.capabilities;
    expect([...bounding, ...effective, ...inheritable, ...permitted, ...ambient]).toEqual([]);
    expect(c.process.noNewPrivileges).toBe(true);
    expect(c.root).toEqual({ path: '/images/x/rootfs', readonly: true });
    expect(c.process.terminal).toBe(false);
  });

  it('gives the process its own pid, network, ipc, uts and mount namespaces and no user namespace', () => {
    expect(c.linux.namespaces.map((n) => n.type)).toEqual(['pid', 'network', 'ipc', 'uts', 'mount']);
    expect(c.linux.namespaces.every((n) => n.path === undefined)).toBe(true);
    expect(c.linux.uidMappings).toBeUndefined();
  });

  it('mounts proc, dev, pts, shm, mqueue and a read-only sysfs, and no /tmp (the chart mounts no emptyDir)', () => {
    expect(c.mounts.map((m) => m.destination)).toEqual([
      '/proc',
      '/dev',
      '/dev/pts',
      '/dev/shm',
      '/dev/mqueue',
      '/sys',
    ]);
    expect(c.mounts.find((m) => m.destination === '/sys')).toMatchObject({
      type: 'sysfs',
      options: expect.arrayContaining(['ro']) as unknown,
    });
    expect(c.linux.seccomp).toBeUndefined();
  });
});

describe('ociConfig overrides', () => {
  it('takes command as the Entrypoint without the image Cmd, and args as the Cmd (Kubernetes rules)', () => {
    expect(processArgs(IMAGE, ['/app/bin/fencepost-agent'])).toEqual(['/app/bin/fencepost-agent']);
    expect(processArgs(IMAGE, ['/app/bin/fencepost-agent'], ['agent'])).toEqual(['/app/bin/fencepost-agent', 'agent']);
    expect(processArgs(IMAGE, undefined, ['controller', '--leader-elect'])).toEqual([
      'node',
      '/app/dist/src/cli/main.js',
      'controller',
      '--leader-elect',
    ]);
    expect(() => processArgs({})).toThrow(/no Entrypoint or Cmd/);
  });

  it('adds env, replacing a name the image sets in place', () => {
    expect(mergeEnv(['A=1', 'B=2'], { B: 'x=y', C: '3' })).toEqual(['A=1', 'B=x=y', 'C=3']);
  });

  it('joins the pod network namespace by path and maps the container user in a new user namespace (rootless)', () => {
    const c = ociConfig(IMAGE, {
      rootfs: '/r',
      seccomp: 'unconfined',
      netns: '/proc/42/ns/net',
      userns: {
        uidMappings: [{ containerID: 65532, hostID: 0, size: 1 }],
        gidMappings: [{ containerID: 65532, hostID: 0, size: 1 }],
      },
    });
    expect(c.linux.namespaces).toContainEqual({ type: 'network', path: '/proc/42/ns/net' });
    expect(c.linux.namespaces).toContainEqual({ type: 'user' });
    expect(c.linux.uidMappings).toEqual([{ containerID: 65532, hostID: 0, size: 1 }]);
    expect(c.mounts.find((m) => m.destination === '/sys')).toMatchObject({ type: 'none', source: '/sys' });
    expect(c.mounts.find((m) => m.destination === '/dev/pts')?.options).not.toContain('gid=5');
  });

  it('adds mounts after the standard ones, and sets uid, gid, fsGroup, hostname and a writable root when asked', () => {
    const sa = {
      destination: '/var/run/secrets/kubernetes.io/serviceaccount',
      type: 'none',
      source: '/pods/p/sa',
      options: ['rbind', 'ro'],
    };
    const c = ociConfig(IMAGE, {
      rootfs: '/r',
      seccomp: 'unconfined',
      mounts: [sa],
      uid: 1000,
      gid: 1001,
      fsGroup: 2000,
      hostname: 'pod-a',
      readonlyRoot: false,
      workingDir: '/',
    });
    expect(c.mounts.at(-1)).toEqual(sa);
    expect(c.process.user).toEqual({ uid: 1000, gid: 1001, additionalGids: [2000] });
    expect(c.hostname).toBe('pod-a');
    expect(c.root.readonly).toBe(false);
    expect(c.process.cwd).toBe('/');
  });

  it('refuses uid 0 under runAsNonRoot, as the kubelet does', () => {
    expect(() => ociConfig(IMAGE, { rootfs: '/r', seccomp: 'unconfined', uid: 0 })).toThrow(/runAsNonRoot/);
    expect(
      ociConfig(IMAGE, { rootfs: '/r', seccomp: 'unconfined', uid: 0, runAsNonRoot: false }).process.user.uid,
    ).toBe(0);
  });
});

describe('seccompFromDocker', () => {
  const profile: DockerSeccompProfile = {
    defaultAction: 'SCMP_ACT_ERRNO',
    defaultErrnoRet: 38,
    archMap: [
      { architecture: 'SCMP_ARCH_X86_64', subArchitectures: ['SCMP_ARCH_X86', 'SCMP_ARCH_X32'] },
      { architecture: 'SCMP_ARCH_AARCH64', subArchitectures: ['SCMP_ARCH_ARM'] },
    ],
    syscalls: [
      { names: ['read', 'write'], action: 'SCMP_ACT_ALLOW', args: [] },
      { names: ['arch_prctl'], action: 'SCMP_ACT_ALLOW', includes: { arches: ['amd64', 'x32'] } },
      { names: ['chroot'], action: 'SCMP_ACT_ALLOW', includes: { caps: ['CAP_SYS_CHROOT'] } },
      { names: ['chroot'], action: 'SCMP_ACT_ERRNO', errnoRet: 1, excludes: { caps: ['CAP_SYS_CHROOT'] } },
      {
        names: ['personality'],
        action: 'SCMP_ACT_ALLOW',
        args: [{ index: 0, value: 8, valueTwo: 0, op: 'SCMP_CMP_EQ' }],
      },
    ],
  };

  it('keeps the rules a process without capabilities gets: the ERRNO twin, not the privileged grant', () => {
    const s = seccompFromDocker(profile, 'amd64');
    expect(s.defaultAction).toBe('SCMP_ACT_ERRNO');
    expect(s.defaultErrnoRet).toBe(38);
    expect(s.architectures).toEqual(['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32']);
    expect(s.syscalls).toEqual([
      { names: ['read', 'write'], action: 'SCMP_ACT_ALLOW' },
      { names: ['arch_prctl'], action: 'SCMP_ACT_ALLOW' },
      { names: ['chroot'], action: 'SCMP_ACT_ERRNO', errnoRet: 1 },
      {
        names: ['personality'],
        action: 'SCMP_ACT_ALLOW',
        args: [{ index: 0, value: 8, valueTwo: 0, op: 'SCMP_CMP_EQ' }],
      },
    ]);
  });

  it('grants the privileged rule to a process holding the capability, and drops rules for other architectures', () => {
    const s = seccompFromDocker(profile, 'arm64', ['CAP_SYS_CHROOT']);
    expect(s.architectures).toEqual(['SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM']);
    expect(s.syscalls.map((r) => `${r.names.join(',')}:${r.action}`)).toEqual([
      'read,write:SCMP_ACT_ALLOW',
      'chroot:SCMP_ACT_ALLOW',
      'personality:SCMP_ACT_ALLOW',
    ]);
    expect(() => seccompFromDocker(profile, 'mips')).toThrow(/unknown architecture/);
  });

  const SYSTEM = '/usr/share/containers/seccomp.json';
  it.skipIf(!existsSync(SYSTEM))(
    'converts the containers-common default profile into 22 rules for amd64 without capabilities',
    () => {
      const s = seccompFromDocker(JSON.parse(readFileSync(SYSTEM, 'utf8')) as DockerSeccompProfile, dockerArch('x64'));
      expect(s.syscalls).toHaveLength(22);
      const allowed = s.syscalls
        .filter((r) => r.action === 'SCMP_ACT_ALLOW' && r.args === undefined)
        .flatMap((r) => r.names);
      expect(allowed).toEqual(expect.arrayContaining(['read', 'epoll_wait', 'clone3', 'arch_prctl']));
      expect(allowed).not.toContain('bpf');
    },
  );
});

describe('imageConfigFromRuntimeSpec', () => {
  it('reads args, env, cwd and user back from a config.json that umoci wrote', () => {
    expect(
      imageConfigFromRuntimeSpec({
        process: { args: ['node', '/app/x.js'], env: ['A=1'], cwd: '/app', user: { uid: 65532, gid: 65532 } },
      }),
    ).toEqual({ Entrypoint: ['node', '/app/x.js'], Env: ['A=1'], WorkingDir: '/app', User: '65532:65532' });
  });
});
