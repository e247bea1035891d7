import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManagedProcess } from '../../support/testbed/processes.ts';
import { tailLog } from '../../support/testbed/processes.ts';
import { firstEvent, startAgent, type AgentProcess } from '../../support/agent-processes.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { eventually, sharedKubeconfigPath } from '../../support/env.ts';
import { createLock, createPod, lockBody, type TestKube } from '../../support/fixtures.ts';
import { leaseName } from '../../../src/protocol/names.ts';
import { parseLease } from '../../../src/lease/record.ts';

// SIGTERM in the plain-sidecar form. The agent is one of the pod's containers, and the kubelet
// sends SIGTERM to all of them at once: the application may still be writing when the agent gets
// it. An agent that released then let the next holder in while the application still worked. With
// --sidecar plain it releases nothing itself: it sends `stopping` on the lock's event stream and
// keeps the term until the application releases (after it stopped writing), or stops at
// --app-stop-timeout without releasing, so that the Lease expires.
const PLAIN = ['--sidecar=plain'];

describe('SIGTERM to an agent in the plain-sidecar form', () => {
  const fx = useLockController('plainstop-');
  let t: TestKube;
  let dir: string;
  const procs: ManagedProcess[] = [];
  beforeAll(() => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-plain-stop-'));
  });
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  /** pair starts the holder (plain form, with `args`) and a second candidate, on a lock of `leaseSeconds`. */
  const pair = async (
    lock: string,
    leaseSeconds: number,
    args: readonly string[],
  ): Promise<{ a: AgentProcess; b: AgentProcess }> => {
    const podA = await createPod(t, `${lock}-a`, { app: lock });
    const a = await startAgent({
      lock,
      pod: `${lock}-a`,
      uid: podA.metadata?.uid ?? '',
      namespace: t.namespace,
      kubeconfig: sharedKubeconfigPath(),
      logDir: dir,
      args,
    });
    procs.push(a.process);
    await createLock(t, lockBody(lock, lock, { leaseDurationSeconds: leaseSeconds }));
    await eventually(async () => {
      expect((await a.snapshot()).held).toBe(true);
    }, 20_000);
    const podB = await createPod(t, `${lock}-b`, { app: lock });
    const b = await startAgent({
      lock,
      pod: `${lock}-b`,
      uid: podB.metadata?.uid ?? '',
      namespace: t.namespace,
      kubeconfig: sharedKubeconfigPath(),
      logDir: dir,
    });
    procs.push(b.process);
    return { a, b };
  };
  const holderOf = async (lock: string): Promise<string | undefined> =>
    parseLease(await t.leases.readNamespacedLease({ name: leaseName(lock), namespace: t.namespace })).holder?.name;

  it(
    'keeps the term after SIGTERM until the application releases it, and tells the application',
    { timeout: 90_000 },
    async () => {
      const { a, b } = await pair('apprel', 4, PLAIN);
      const stream = await subscribe(a.port, 'apprel'); // the application listens from its start
      const granted = firstEvent(b.port, 'apprel', 'granted');
      let grantedAt: number | undefined;
      void granted.at.then((at) => {
        grantedAt = at;
      });
      const termAt = performance.now();
      a.process.signal('SIGTERM');
      try {
        // The application is still shutting down for 2 s: the lock stays with it.
        await new Promise((r) => setTimeout(r, 2000));
        process.stdout.write(
          `plain sidecar: successor granted ${grantedAt === undefined ? 'not yet' : `${Math.round(grantedAt - termAt)} ms after SIGTERM`} while the application had not released\n`,
        );
        expect(grantedAt, 'the successor was granted before the application released').toBeUndefined();
        expect(await holderOf('apprel')).toBe('apprel-a');
        expect((await a.snapshot()).held).toBe(true);
        expect(stream.events(), 'the application was sent `stopping`').toContain('stopping');

        const releasedAt = performance.now();
        expect(await post(a.port, '/v1/locks/apprel/release')).toBe(200);
        expect(await a.process.exited, tailLog(a.process.logFile)).toBe(0);
        const at = await granted.at;
        expect(at - releasedAt).toBeLessThan(3000); // at once, not after the lease
      } finally {
        stream.stop();
        granted.stop();
      }
    },
  );

  it(
    'stops at --app-stop-timeout without releasing: the successor waits for the lease',
    { timeout: 90_000 },
    async () => {
      const { a, b } = await pair('noapp', 4, [...PLAIN, '--app-stop-timeout=1s']);
      const granted = firstEvent(b.port, 'noapp', 'granted');
      a.process.signal('SIGTERM');
      try {
        expect(await a.process.exited, tailLog(a.process.logFile)).toBe(0);
        const exitedAt = performance.now();
        expect(await holderOf('noapp')).toBe('noapp-a'); // not released
        const at = await granted.at;
        process.stdout.write(
          `plain sidecar, no release: successor granted ${Math.round(at - exitedAt)} ms after the agent exited (lease 4 s)\n`,
        );
        // The last renewal was at most a renew period (1.33 s) before the exit: the lease runs on after it.
        expect(at - exitedAt).toBeGreaterThan(4000 - 1500);
      } finally {
        granted.stop();
      }
    },
  );
});

function post(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method: 'POST', headers: { 'content-type': 'application/json' } },
      (res) => {
        res.resume();
        res.on('end', () => {
          resolve(res.statusCode ?? 0);
        });
      },
    );
    req.on('error', reject);
    req.end('{}');
  });
}

/** subscribe opens the lock's event stream and resolves once its opening `state` arrived. */
async function subscribe(port: number, lock: string): Promise<{ events: () => string[]; stop: () => void }> {
  let text = '';
  let req: ReturnType<typeof request> | undefined;
  await new Promise<void>((resolve, reject) => {
    req = request(`http://127.0.0.1:${port}/v1/locks/${lock}/events`, (res) => {
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        if (text.includes('event: state\n')) resolve();
      });
    });
    req.on('error', reject);
    req.end();
  });
  return {
    events: () => [...text.matchAll(/^event: (.+)$/gm)].map((m) => m[1] ?? ''),
    stop: () => {
      req?.destroy();
    },
  };
}
