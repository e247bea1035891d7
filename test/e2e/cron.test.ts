import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GROUP, PLURAL, VERSION, type DistributedLock } from '../../src/api/v1alpha1/distributedlock.ts';
import { eventually } from '../support/env.ts';
import { ROOT, dumpDiagnostics, useE2eCluster } from './e2e-cluster.ts';

const NS = 'e2e-cron';

// examples/cron-fleet.yaml: a CronJob whose every run is a Job of three parallel pods, each running
// `fencepost exec --lock nightly-report --run-id <job name>`. The pods are scheduled on kwok's nodes
// and their exec containers run as local processes with the pods' identities; when a process exits
// the pod runner reports it in the pod status, so the Job controller sees the pods finish.
describe('a cron fleet with fencepost exec and a run id (examples/cron-fleet.yaml)', () => {
  const e = useE2eCluster([NS]);

  /** runJob creates a Job from the CronJob, waits until it is Complete, and returns each pod's exit and output. */
  const runJob = async (name: string): Promise<{ pod: string; exit: number | string | undefined; output: string }[]> => {
    await e.kubectl(['create', 'job', '-n', NS, name, '--from=cronjob/nightly-report']);
    await e.kubectl(['wait', '-n', NS, `job/${name}`, '--for=condition=Complete', '--timeout=90s']).catch(async (err: unknown) => {
      throw new Error(`${String(err)}\n${await e.kubectl(['get', 'pods,jobs', '-n', NS, '-o', 'wide'])}\n${await dumpDiagnostics(e, NS)}`);
    });
    const ran = e.runner.containers().filter((c) => c.namespace === NS && c.pod.startsWith(`${name}-`));
    await eventually(() => { expect(ran.every((c) => c.exitCode !== undefined)).toBe(true); }, 30_000, 100);
    return ran.map((c) => ({ pod: c.pod, exit: c.exitCode, output: readFileSync(c.logFile, 'utf8') }));
  };

  it('each run id is executed exactly once across the fleet, with a larger token each time', async () => {
    await e.kubectl(['apply', '-n', NS, '-f', join(ROOT, 'examples/cron-fleet.yaml')]);
    const tokens: bigint[] = [];
    for (const run of ['nightly-report-run-1', 'nightly-report-run-2']) {
      const pods = await runJob(run);
      expect(pods.length, JSON.stringify(pods)).toBeGreaterThanOrEqual(3);
      const executed = pods.filter((p) => p.output.includes(`nightly report ${run} by`));
      expect(executed, JSON.stringify(pods)).toHaveLength(1);
      expect(executed[0]?.exit).toBe(0);
      // Every other pod saw the run id completed and did not run the command.
      expect(pods.filter((p) => p !== executed[0]).map((p) => p.exit)).toEqual(pods.slice(1).map(() => 5));
      const token = /with fencing token (\d+)/.exec(executed[0]?.output ?? '')?.[1];
      expect(token).toMatch(/^\d+$/);
      tokens.push(BigInt(token ?? '0'));
      const lock = await e.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name: 'nightly-report' }) as DistributedLock;
      expect(lock.status?.completedRuns?.map((r) => r.runId)).toContain(run);
    }
    expect(tokens[1]).toBeGreaterThan(tokens[0] ?? 0n);
  });
});
