import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hybridCgroups, resolveIn } from '../../support/cluster/sandbox.ts';

describe('the pod sandbox', () => {
  const root = mkdtempSync(join(tmpdir(), 'fencepost-resolve-'));
  mkdirSync(join(root, 'usr/lib'), { recursive: true });
  mkdirSync(join(root, 'var'));
  symlinkSync('/run', join(root, 'var/run'));
  symlinkSync('usr/lib', join(root, 'lib'));
  symlinkSync('../tmp', join(root, 'var/tmp'));
  afterAll(() => {
    rmSync(root, { recursive: true, force: true });
  });

  it.each([
    ['/var/run/secrets/kubernetes.io/serviceaccount', '/run/secrets/kubernetes.io/serviceaccount'],
    ['/lib/x', '/usr/lib/x'],
    ['/var/tmp/a', '/tmp/a'],
    ['/etc/missing/dir', '/etc/missing/dir'],
  ])('resolves %s inside the image root as the container sees it: %s', (path, want) => {
    expect(resolveIn(root, path)).toBe(want);
  });

  it('covers the cgroup2 mount only on hybrid machines (crun 1.8 refuses them)', () => {
    const line = (mountPoint: string, fs: string): string => `41 31 0:38 / ${mountPoint} rw,relatime - ${fs} ${fs} rw`;
    expect(
      hybridCgroups([line('/sys/fs/cgroup/cpu', 'cgroup'), line('/sys/fs/cgroup/unified', 'cgroup2')].join('\n')),
    ).toBe(true);
    expect(hybridCgroups(line('/sys/fs/cgroup', 'cgroup2'))).toBe(false);
  });
});
