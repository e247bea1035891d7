import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION } from '../../../src/api/v1alpha1/distributedlock.ts';
import { findBinary } from '../../support/testbed/assets.ts';
import { freshNamespace, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';
import { mergePatch } from '../../support/fixtures.ts';

const run = promisify(execFile);
const example = resolve(import.meta.dirname, '../../../examples/basic-lock.yaml');

// What a person sees: the example applies with kubectl, and `kubectl get dlock` prints the
// printer columns with the values the controller writes into status.
describe('kubectl and the DistributedLock CRD', () => {
  const kc = sharedKubeConfig();
  let namespace = '';
  const kubectl = async (...args: string[]) =>
    (await run(findBinary('kubectl'), ['--kubeconfig', sharedKubeconfigPath(), '-n', namespace, ...args])).stdout;
  beforeAll(async () => {
    namespace = await freshNamespace(kc, 'kubectl-');
  });

  it('applies the example lock and prints READY, HOLDER, TOKEN, HELD-FOR and AGE (MODE, STORE, TRANSITIONS, HELD and PERMITS with -o wide)', async () => {
    expect(await kubectl('apply', '-f', example)).toContain('distributedlock.fencepost.io/billing created');
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObjectStatus(
      {
        group: GROUP,
        version: VERSION,
        namespace,
        plural: PLURAL,
        name: 'billing',
        body: {
          status: {
            holder: { name: 'billing-7d9f-abcde', uid: 'u-1' },
            fencingToken: '9007199254740993',
            acquireTime: new Date(Date.now() - 10 * 60_000).toISOString(), // held for ten minutes
            leaseTransitions: 3,
            conditions: [
              {
                type: 'Ready',
                status: 'True',
                reason: 'AsExpected',
                message: 'The lock is managed and can be granted',
                lastTransitionTime: '2026-12-02T12:00:00Z',
              },
            ],
          },
        },
      },
      mergePatch,
    );

    const table = await kubectl('get', 'dlock');
    const [header, row] = table.trim().split('\n');
    expect(header?.split(/\s+/)).toEqual(['NAME', 'READY', 'HOLDER', 'TOKEN', 'HELD-FOR', 'AGE']);
    expect(row).toMatch(/^billing\s+True\s+billing-7d9f-abcde\s+9007199254740993\s+1\dm\s+\d+s/);

    const wide = await kubectl('get', 'distributedlocks.fencepost.io', '-o', 'wide');
    expect(wide.split('\n')[0]?.split(/\s+/)).toEqual([
      'NAME',
      'READY',
      'HOLDER',
      'TOKEN',
      'HELD-FOR',
      'MODE',
      'STORE',
      'TRANSITIONS',
      'HELD',
      'PERMITS',
      'AGE',
    ]);
    expect(wide).toMatch(/Election\s+Lease\s+3\s+\d+s/); // HELD and PERMITS are blank: Semaphore-only
  });

  it('refuses an invalid lock on kubectl apply with a message naming the field', async () => {
    const bad = `apiVersion: fencepost.io/v1alpha1\nkind: DistributedLock\nmetadata: {name: bad}\nspec:\n  leaseDurationSeconds: 10\n  renewDeadlineSeconds: 12\n  candidates: {selector: {matchLabels: {app: x}}}\n`;
    const child = execFile(findBinary('kubectl'), [
      '--kubeconfig',
      sharedKubeconfigPath(),
      '-n',
      namespace,
      'apply',
      '-f',
      '-',
    ]);
    child.stdin?.end(bad);
    let stderr = '';
    child.stderr?.on('data', (d: string) => {
      stderr += d;
    });
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    expect(code).not.toBe(0);
    expect(stderr).toContain('spec.renewDeadlineSeconds must be less than spec.leaseDurationSeconds');
  });
});
