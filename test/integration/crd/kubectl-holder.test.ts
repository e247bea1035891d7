import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { findBinary } from '../../support/testbed/assets.ts';
import { eventually, sharedKubeconfigPath } from '../../support/env.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { createLock, createPod, getLock, lockBody, type TestKube } from '../../support/fixtures.ts';

const run = promisify(execFile);

/** parseTable reads kubectl's table output by the column positions of its header, so that an
 *  empty cell (a vacant lock has no holder) does not shift the columns after it. */
function parseTable(text: string): Record<string, string>[] {
  const [header = '', ...rows] = text.trimEnd().split('\n');
  const columns = [...header.matchAll(/\S+/g)].map((m) => ({ name: m[0], start: m.index }));
  return rows.map((row) =>
    Object.fromEntries(columns.map((c, i) => [c.name, row.slice(c.start, columns[i + 1]?.start).trim()])),
  );
}

// What a person asks kubectl about locks, answered by the real controller's status: the READY
// column, and `--field-selector status.holder.name=POD` (the CRD's selectableFields), which the
// API server itself filters. Two pods hold three locks between them; a fourth lock has no
// candidate and stays vacant. Leases of an hour: nothing expires while the test reads.
describe('kubectl get dlock against the controller', () => {
  const fx = useLockController('kubectl-held-');
  let t: TestKube;
  const kubectl = async (...args: string[]) =>
    (await run(findBinary('kubectl'), ['--kubeconfig', sharedKubeconfigPath(), '-n', t.namespace, ...args])).stdout;
  const names = async (...selector: string[]) =>
    (await kubectl('get', 'dlock', '-o', 'name', ...selector))
      .split('\n')
      .filter((l) => l !== '')
      .sort();

  beforeAll(async () => {
    t = fx.t;
    await createPod(t, 'web-0', { app: 'web' });
    await createPod(t, 'batch-0', { app: 'batch' });
    for (const [lock, app] of [
      ['primary', 'web'],
      ['cache-warmer', 'web'],
      ['nightly', 'batch'],
      ['vacant', 'nobody'],
    ] as const) {
      await createLock(t, lockBody(lock, app, { leaseDurationSeconds: 3600 }));
    }
    await eventually(async () => {
      for (const [lock, pod] of [
        ['primary', 'web-0'],
        ['cache-warmer', 'web-0'],
        ['nightly', 'batch-0'],
      ] as const) {
        expect((await getLock(t, lock)).status?.holder?.name).toBe(pod);
      }
      expect((await getLock(t, 'vacant')).status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    });
  });

  it('prints a READY column with the status of the Ready condition, beside the holder and its token', async () => {
    const table = await kubectl('get', 'dlock');
    expect(table.split('\n')[0]?.split(/\s+/)).toEqual(['NAME', 'READY', 'HOLDER', 'TOKEN', 'HELD-FOR', 'AGE']);
    const rows = new Map(parseTable(table).map((r) => [r['NAME'] ?? '', r]));
    const primary = await getLock(t, 'primary');
    expect(rows.get('primary')).toMatchObject({
      READY: 'True',
      HOLDER: 'web-0',
      TOKEN: primary.status?.fencingToken,
      'HELD-FOR': expect.stringMatching(/^\d+[smhd]/) as string, // since status.acquireTime
    });
    expect(rows.get('nightly')).toMatchObject({ READY: 'True', HOLDER: 'batch-0' });
    expect(rows.get('vacant')).toMatchObject({ READY: 'True', HOLDER: '' });
  });

  it('answers "what does this pod hold" with --field-selector status.holder.name=POD', async () => {
    expect(await names('--field-selector', 'status.holder.name=web-0')).toEqual([
      'distributedlock.fencepost.io/cache-warmer',
      'distributedlock.fencepost.io/primary',
    ]);
    expect(await names('--field-selector', 'status.holder.name=batch-0')).toEqual([
      'distributedlock.fencepost.io/nightly',
    ]);
    expect(await names('--field-selector', 'status.holder.name=no-such-pod')).toEqual([]);
  });

  it('lists the vacant locks with an empty holder, and the others with !=', async () => {
    expect(await names('--field-selector', 'status.holder.name=')).toEqual(['distributedlock.fencepost.io/vacant']);
    expect(await names('--field-selector', 'status.holder.name!=web-0')).toEqual([
      'distributedlock.fencepost.io/nightly',
      'distributedlock.fencepost.io/vacant',
    ]);
  });

  it('refuses a field that is not selectable, naming the fields that are', async () => {
    const err = await kubectl('get', 'dlock', '--field-selector', 'spec.mode=Mutex').then(
      () => undefined,
      (e: unknown) => e as { stderr: string },
    );
    expect(err?.stderr).toMatch(/field label not supported: spec\.mode/);
  });
});
