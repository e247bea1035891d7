import { readFileSync } from 'node:fs';
import type { V1EnvVar, V1Pod } from '@kubernetes/client-node';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLock, getLock, lockBody, testKube } from '../support/fixtures.ts';
import { eventually } from '../support/env.ts';
import { parseLease } from '../../src/lease/record.ts';
import { leaseName } from '../../src/protocol/names.ts';
import { watchHolders } from './holders.ts';
import { IMAGE, ON_KUBELET, ROOT, dumpDiagnostics, useSharedE2eCluster } from './e2e-cluster.ts';

const NS = 'e2e-cron';

interface RanContainer {
  readonly pod: string;
  readonly container: string;
  readonly exit: number | string | undefined;
  readonly output: string;
}

// examples/cron-fleet.yaml: two CronJobs whose every run is a Job of three parallel pods asking one
// Mutex lock with the run id (the Job's name). nightly-report runs `fencepost exec --lock
// nightly-report --run-id <job name>`; nightly-export runs the agent as a native sidecar and a
// shell script with curl against it. The pods are scheduled on kwok's nodes and their containers
// run as local processes with the pods' identities — the fencepost ones with this checkout, the
// curl image's script verbatim with this machine's sh and curl; when the main container exits the
// pod runner stops the sidecars and reports the pod status, so the Job controller sees the pods
// finish (test/support/cluster/pod-runner.ts). With FENCEPOST_E2E_RUNTIME=kubelet both run on the
// real node: fencepost's containers from the image, the curl job from an image of this machine's
// sh and curl; the kubelet runs them, orders the sidecars and reports the exits.
describe('a cron fleet with a run id (examples/cron-fleet.yaml)', () => {
  const e = useSharedE2eCluster(NS);

  /** runJob creates a Job from a CronJob, waits until it is Complete, and returns each container's exit and output. */
  const runJob = async (cronJob: string, name: string): Promise<RanContainer[]> => {
    await e.kubectl(['create', 'job', '-n', NS, name, `--from=cronjob/${cronJob}`]);
    await e
      .kubectl(['wait', '-n', NS, `job/${name}`, '--for=condition=Complete', '--timeout=90s'])
      .catch(async (err: unknown) => {
        const steps = ON_KUBELET
          ? []
          : e.runner
              .history()
              .filter((h) => h.namespace === NS && h.pod.startsWith(`${name}-`))
              .map((h) => `${h.pod}/${h.container}:${h.what}${h.exitCode !== undefined ? `(${h.exitCode})` : ''}`);
        throw new Error(
          `${String(err)}\n${await e.kubectl(['get', 'pods,jobs', '-n', NS, '-o', 'wide'])}\npod runner: ${steps.join(' → ')}\n${await dumpDiagnostics(e, NS)}`,
        );
      });
    if (ON_KUBELET) return ranOnKubelet(name);
    const ran = e.runner.containers().filter((c) => c.namespace === NS && c.pod.startsWith(`${name}-`));
    await eventually(
      () => {
        expect(ran.every((c) => c.exitCode !== undefined)).toBe(true);
      },
      30_000,
      100,
    );
    return ran.map((c) => ({
      pod: c.pod,
      container: c.container,
      exit: c.exitCode,
      output: readFileSync(c.logFile, 'utf8'),
    }));
  };
  /** ranOnKubelet reads a Job's containers as the kubelet reported them: exit codes from the pod status, output from their logs. */
  const ranOnKubelet = async (job: string): Promise<RanContainer[]> => {
    const pods = await e.core.listNamespacedPod({
      namespace: NS,
      labelSelector: `batch.kubernetes.io/job-name=${job}`,
    });
    const out: RanContainer[] = [];
    for (const p of pods.items)
      for (const c of [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])]) {
        const pod = p.metadata?.name ?? '';
        out.push({
          pod,
          container: c.name,
          exit: c.state?.terminated?.exitCode,
          output: await e.kubectl(['logs', '-n', NS, pod, '-c', c.name]).catch((err: unknown) => String(err)),
        });
      }
    return out;
  };
  const completedRuns = async (lock: string): Promise<string[]> => {
    const obj = await getLock(testKube(e.kc, NS), lock);
    return obj.status?.completedRuns?.map((r) => r.runId) ?? [];
  };

  it('fencepost exec: each run id is executed exactly once across the fleet, with a larger token each time', async () => {
    await e.kubectl(['apply', '-n', NS, '-f', join(ROOT, 'examples/cron-fleet.yaml')]);
    const tokens: bigint[] = [];
    for (const run of ['nightly-report-run-1', 'nightly-report-run-2']) {
      const pods = await runJob('nightly-report', run);
      expect(pods.length, JSON.stringify(pods)).toBeGreaterThanOrEqual(3);
      const executed = pods.filter((p) => p.output.includes(`nightly report ${run} by`));
      expect(executed, JSON.stringify(pods)).toHaveLength(1);
      expect(executed[0]?.exit).toBe(0);
      // Every other pod saw the run id completed and did not run the command.
      expect(pods.filter((p) => p !== executed[0]).map((p) => p.exit)).toEqual(pods.slice(1).map(() => 5));
      const token = /with fencing token (\d+)/.exec(executed[0]?.output ?? '')?.[1];
      expect(token).toMatch(/^\d+$/);
      tokens.push(BigInt(token ?? '0'));
      expect(await completedRuns('nightly-report')).toContain(run);
    }
    expect(tokens[1]).toBeGreaterThan(tokens[0] ?? 0n);
  });

  // The same with the agent as a native sidecar and a job image that is not fencepost's: the
  // script acquires with the run id over the agent's HTTP API, runs and reports the run completed
  // with the token it was granted; the other pods are answered already-done and exit 0 without
  // running it. Each pod's job container starts only after its agent's startupProbe passed, and the
  // Job completes because the kubelet (here the pod runner) stops the sidecar once the job's
  // container has exited.
  // On the real node the job's image is made of this machine's sh and curl (no registry serves
  // curl's here; e2e-cluster.ts EXAMPLE_CURL_IMAGE), and the order is containerd's event stream.
  it('native sidecar + curl: each run id runs exactly once, the others are told already done, and the Job completes with its sidecars stopped after the job', async () => {
    await e.kubectl(['apply', '-n', NS, '-f', join(ROOT, 'examples/cron-fleet.yaml')]);
    const tokens: bigint[] = [];
    for (const run of ['nightly-export-run-1', 'nightly-export-run-2']) {
      const events = ON_KUBELET ? e.node.events() : undefined;
      const ran = await runJob('nightly-export', run);
      const jobs = ran.filter((c) => c.container === 'export');
      const pods = [...new Set(ran.map((c) => c.pod))];
      expect(pods.length, JSON.stringify(ran)).toBeGreaterThanOrEqual(3);
      expect(jobs.map((c) => c.pod).sort(), 'one job container per pod').toEqual(pods.sort());
      const executed = jobs.filter((c) => c.output.includes(`nightly export ${run} by`));
      expect(executed, JSON.stringify(jobs)).toHaveLength(1);
      const others = jobs.filter((c) => c !== executed[0]);
      for (const c of others)
        expect(c.output, c.pod).toMatch(
          new RegExp(`nightly export ${run} already done by another pod, not run: .*already-done`),
        );
      expect(
        jobs.map((c) => c.exit),
        JSON.stringify(jobs),
      ).toEqual(jobs.map(() => 0));
      const token = /with fencing token (\d+)/.exec(executed[0]?.output ?? '')?.[1];
      expect(token).toMatch(/^\d+$/);
      tokens.push(BigInt(token ?? '0'));
      expect(await completedRuns('nightly-export')).toContain(run);

      // The kubelet's order in each pod: the agent ready before the job started; the agent asked
      // to stop only after the job container exited, and then it exited too (the Job completed).
      if (events !== undefined) {
        // The kubelet's order in each pod, as containerd ran it: the agent started before the
        // job (its startupProbe gating the job is native-sidecar.test.ts's claim), the job
        // exited 0 before the agent was stopped, and the agent exited too (the Job completed).
        const seen = await eventually(
          () => {
            const list = events.list();
            for (const pod of pods)
              expect(
                list.some((ev) => ev.pod === pod && ev.container === 'fencepost-agent' && ev.what === 'exit'),
                pod,
              ).toBe(true);
            return list;
          },
          30_000,
          200,
        );
        await events.stop();
        for (const pod of pods) {
          const steps = seen
            .filter((ev) => ev.namespace === NS && ev.pod === pod)
            .map((ev) => `${ev.container}:${ev.what}${ev.exitStatus !== undefined ? `(${ev.exitStatus})` : ''}`);
          const at = (step: string): number => steps.indexOf(step);
          expect(at('fencepost-agent:start'), steps.join(' → ')).toBeGreaterThanOrEqual(0);
          expect(at('fencepost-agent:start'), steps.join(' → ')).toBeLessThan(at('export:start'));
          expect(at('export:exit(0)'), steps.join(' → ')).toBeGreaterThan(at('export:start'));
          expect(at('export:exit(0)'), steps.join(' → ')).toBeLessThan(
            steps.findIndex((x) => x.startsWith('fencepost-agent:exit')),
          );
        }
      }
      for (const pod of ON_KUBELET ? [] : pods) {
        const steps = e.runner
          .history()
          .filter((h) => h.namespace === NS && h.pod === pod)
          .map((h) => `${h.container}:${h.what}`);
        const at = (step: string): number => steps.indexOf(step);
        expect(at('fencepost-agent:probed'), steps.join(' → ')).toBeGreaterThanOrEqual(0);
        expect(at('fencepost-agent:probed'), steps.join(' → ')).toBeLessThan(at('export:started'));
        expect(at('export:exited'), steps.join(' → ')).toBeLessThan(at('fencepost-agent:sigterm'));
        expect(at('fencepost-agent:sigterm'), steps.join(' → ')).toBeLessThan(at('fencepost-agent:exited'));
      }
      const phases = (
        await e.kubectl([
          'get',
          'pods',
          '-n',
          NS,
          '-l',
          `batch.kubernetes.io/job-name=${run}`,
          '-o',
          'jsonpath={.items[*].status.phase}',
        ])
      ).split(' ');
      expect(phases).toEqual(pods.map(() => 'Succeeded'));
    }
    expect(tokens[1]).toBeGreaterThan(tokens[0] ?? 0n);
    process.stderr.write(`[e2e] cron fleet with the native sidecar: tokens ${tokens.join(', ')}\n`);
  });

  // Graceful termination as the kubelet does it, on the real node only: a pod whose `fencepost
  // exec` job ignores SIGTERM is deleted with a grace period of GRACE_S. The kubelet sends SIGTERM
  // (exec forwards it to the job, which goes on, and exec keeps holding and renewing), waits the
  // grace period, then SIGKILLs the container — exec is its PID 1, so the job dies with it. The
  // waiting pod is granted only after that exit, as the controller hands the lock over when the
  // kubelet reports every container of the holder pod terminated (docs/controller.md), without
  // waiting for the lease to expire.
  it.skipIf(!ON_KUBELET)(
    'a job that ignores SIGTERM: the kubelet SIGKILLs it after the grace period, and only then is the next pod granted, with a larger token',
    async () => {
      const LOCK = 'graceful';
      const GRACE_S = 6;
      const LEASE_S = 15;
      await createLock(testKube(e.kc, NS), lockBody(LOCK, LOCK, { leaseDurationSeconds: LEASE_S, mode: 'Mutex' }));
      // The job prints when it starts (with its token), every SIGTERM it ignores, and a tick every 200 ms.
      const job = [
        "process.on('SIGTERM', () => console.log(`SIGTERM ignored at ${Date.now()}`));",
        'console.log(`started at ${Date.now()} with token ${process.env.FENCEPOST_TOKEN}`);',
        'setInterval(() => console.log(`tick ${Date.now()}`), 200);',
      ].join(' ');
      const fieldEnv = (name: string, path: string): V1EnvVar => ({
        name,
        valueFrom: { fieldRef: { fieldPath: path } },
      });
      const pod = (name: string): V1Pod => ({
        metadata: { name, labels: { app: LOCK } },
        spec: {
          restartPolicy: 'Never',
          serviceAccountName: 'fencepost-agent',
          terminationGracePeriodSeconds: GRACE_S,
          securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'job',
              image: IMAGE,
              command: ['/app/bin/fencepost-agent'],
              args: ['exec', `--lock=${LOCK}`, '--wait=10m', '--', 'node', '-e', job],
              env: [
                fieldEnv('POD_NAME', 'metadata.name'),
                fieldEnv('POD_NAMESPACE', 'metadata.namespace'),
                fieldEnv('POD_UID', 'metadata.uid'),
              ],
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'] },
              },
            },
          ],
        },
      });
      const logs = (name: string): Promise<string> =>
        e.kubectl(['logs', '-n', NS, name, '-c', 'job']).catch((err: unknown) => String(err));
      const lease = async (): Promise<{
        holder: string | undefined;
        token: bigint | undefined;
        acquiredMs: number;
      }> => {
        const l = await e.leases.readNamespacedLease({ namespace: NS, name: leaseName(LOCK) });
        const r = parseLease(l);
        return { holder: r.holder?.name, token: r.token, acquiredMs: new Date(l.spec?.acquireTime ?? 0).getTime() };
      };

      await e.core.createNamespacedPod({ namespace: NS, body: pod('graceful-a') });
      const first = await eventually(
        async () => {
          const l = await lease();
          expect(l.holder).toBe('graceful-a');
          expect(await logs('graceful-a')).toMatch(/started at \d+ with token \d+/);
          return l;
        },
        60_000,
        250,
      );
      await e.core.createNamespacedPod({ namespace: NS, body: pod('graceful-b') });
      // B's exec asked and waits in the queue.
      await eventually(
        async () => {
          const lock = await getLock(testKube(e.kc, NS), LOCK);
          expect(lock.status?.queue?.map((q) => q.pod)).toEqual(['graceful-b']);
        },
        60_000,
        250,
      );

      const events = e.node.events();
      const watch = watchHolders(e, NS, LOCK, 100);
      const deletedMs = Date.now();
      await e.kubectl(['delete', 'pod', '-n', NS, 'graceful-a', '--wait=false']);
      const second = await eventually(
        async () => {
          const l = await lease();
          expect(l.holder).toBe('graceful-b');
          return l;
        },
        GRACE_S * 1000 + LEASE_S * 1000 + 30_000,
        100,
      ).catch(async (err: unknown) => {
        throw new Error(`${String(err)}\n${await dumpDiagnostics(e, NS)}`);
      });
      const report = await watch.stop();
      // The old job's end as the runtime saw it (it may come after the grant, if the grant was early).
      const exit = await eventually(
        () => {
          const ev = events.list().find((x) => x.pod === 'graceful-a' && x.container === 'job' && x.what === 'exit');
          expect(ev).toBeDefined();
          return ev;
        },
        GRACE_S * 1000 + 30_000,
        100,
      );
      await events.stop();
      const startedB = /started at (\d+) with token (\d+)/.exec(
        await eventually(
          async () => {
            const out = await logs('graceful-b');
            expect(out).toMatch(/started at \d+/);
            return out;
          },
          30_000,
          250,
        ),
      );
      const exitMs = exit?.at ?? Infinity;
      process.stderr.write(
        `[e2e] graceful termination: graceful-a deleted; its job container exited ${String(exit?.exitStatus)} ` +
          `${exitMs - deletedMs} ms later (grace ${GRACE_S} s); graceful-b granted ${second.acquiredMs - exitMs} ms after that exit ` +
          `and its job started ${Number(startedB?.[1] ?? 0) - exitMs} ms after it; tokens ${String(first.token)} → ${String(second.token)}\n`,
      );
      // No grant, and no start of the next job, while the old job still ran (the runtime's exit
      // time, the API server's acquireTime and the job's clock are all this host's clock) ...
      expect(second.acquiredMs, 'graceful-b granted before graceful-a exited').toBeGreaterThanOrEqual(exitMs);
      expect(Number(startedB?.[1] ?? 0), "graceful-b's job started before graceful-a's exited").toBeGreaterThanOrEqual(
        exitMs,
      );
      // ... because the kubelet waited out the grace period, then killed the container: the job
      // ignored SIGTERM and exec did not give up the lock under it.
      expect(exit?.exitStatus).toBe(137);
      expect(exitMs - deletedMs).toBeGreaterThanOrEqual((GRACE_S - 1) * 1000);
      // ... and a grant on the kubelet's report of the terminated pod, not on the lease's expiry.
      expect(second.acquiredMs - exitMs).toBeLessThan(LEASE_S * 1000);
      expect(second.token ?? 0n).toBeGreaterThan(first.token ?? 0n);
      expect(startedB?.[2]).toBe(String(second.token));
      expect(report.terms.map((t) => t.holder)).toEqual(['graceful-a', 'graceful-b']);
      expect(report.overlaps).toEqual([]);
      await e.kubectl(['delete', 'pod', '-n', NS, 'graceful-b', '--wait=false']);
    },
    150_000,
  );
});
