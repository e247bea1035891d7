import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeConfig } from '@kubernetes/client-node';
import type { ManagedProcess } from '../../support/testbed/processes.ts';
import { firstEvent, startAgent } from '../../support/agent-processes.ts';
import { startTcpProxy, type TcpProxy } from '../../support/testbed/tcp-proxy.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { eventually, sharedKubeconfigPath } from '../../support/env.ts';
import { buildMonotonicStall, type MonotonicStall } from '../../support/monotonic-stall.ts';
import { createLock, createPod, lockBody, type TestKube } from '../../support/fixtures.ts';

// A VM pause stops CLOCK_MONOTONIC (performance.now(), Node's timers) while the wall clock is set
// right after resume. The holder's agent runs with an LD_PRELOAD shim that makes its monotonic
// clocks stand still while its wall clock runs on, and is cut off from the API server (as a paused
// VM is: nothing it would learn gets in). The real controller expires the term and grants it to the
// other agent. The held agent must stop believing by its own deadline, measured by the wall clock
// too — not at the end of the pause. Its beliefs are read the way the application reads them,
// through the local API, every 100 ms.
const shim = buildMonotonicStall();
const unavailable = 'unavailable' in shim ? shim.unavailable : undefined;

describe.skipIf(unavailable !== undefined)('an agent whose monotonic clock stands still (a VM pause)', () => {
  if (unavailable !== undefined) process.stdout.write(`vm-pause: skipped: ${unavailable}\n`);
  const fx = useLockController('vmpause-');
  let t: TestKube;
  let dir: string;
  let proxy: TcpProxy | undefined;
  const procs: ManagedProcess[] = [];
  beforeAll(() => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-vm-pause-'));
  });
  afterAll(async () => {
    if (!('unavailable' in shim)) shim.remove();
    await Promise.all(procs.map((p) => p.stop()));
    await proxy?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('stops believing at its renew deadline by the wall clock, before the successor is granted', async () => {
    const stall = shim as MonotonicStall;
    const admin = new KubeConfig();
    admin.loadFromFile(sharedKubeconfigPath());
    const server = new URL(admin.getCurrentCluster()?.server ?? '');
    const cut = await startTcpProxy({ targetPort: Number(server.port) });
    proxy = cut;
    const viaProxy = join(dir, 'kubeconfig-proxied');
    writeFileSync(viaProxy, admin.exportConfig().replace(server.origin, `https://127.0.0.1:${cut.port}`));

    const a = await createPod(t, 'paused-a', { app: 'paused' });
    const agentA = await startAgent({
      lock: 'paused',
      pod: 'paused-a',
      uid: a.metadata?.uid ?? '',
      namespace: t.namespace,
      kubeconfig: viaProxy,
      logDir: dir,
      env: stall.env,
    });
    procs.push(agentA.process);
    await createLock(t, lockBody('paused', 'paused', { leaseDurationSeconds: 3 })); // renew deadline 2 s, period 1 s
    await eventually(async () => {
      expect((await agentA.snapshot()).held).toBe(true);
    }, 20_000);
    const b = await createPod(t, 'paused-b', { app: 'paused' });
    const agentB = await startAgent({
      lock: 'paused',
      pod: 'paused-b',
      uid: b.metadata?.uid ?? '',
      namespace: t.namespace,
      kubeconfig: sharedKubeconfigPath(),
      logDir: dir,
    });
    procs.push(agentB.process);

    const granted = firstEvent(agentB.port, 'paused', 'granted');
    const pauseAt = performance.now();
    stall.stall();
    cut.blackhole();
    // Belief as the application sees it: every 100 ms, until 3 s after the successor's grant.
    const beliefs: { at: number; held: boolean; expiresInMs: number | undefined }[] = [];
    let grantedAt: number | undefined;
    void granted.at.then((at) => {
      grantedAt = at;
    });
    try {
      const until = pauseAt + 20_000;
      while (performance.now() < until && (grantedAt === undefined || performance.now() < grantedAt + 3000)) {
        const s = await agentA.snapshot();
        beliefs.push({ at: performance.now() - pauseAt, held: s.held, expiresInMs: s.expiresInMs });
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      stall.resume();
      cut.heal();
      granted.stop();
    }
    expect(grantedAt, 'the successor was granted').toBeDefined();
    const successorAt = (grantedAt ?? 0) - pauseAt;
    const lastHeld = beliefs.filter((x) => x.held).at(-1);
    const stillBelieving = beliefs.filter((x) => x.held && x.at >= successorAt);
    process.stdout.write(
      `vm-pause: successor granted ${Math.round(successorAt)} ms after the pause began; the paused holder last said held at ${lastHeld === undefined ? '—' : `${Math.round(lastHeld.at)} ms (expiresInMs ${String(lastHeld.expiresInMs)})`}; ${stillBelieving.length} reads said held after the grant\n`,
    );
    // At its renew deadline (2 s after its last renew, which was sent before the pause), with room
    // for a loaded machine — and never after the successor's grant.
    expect(lastHeld?.at ?? 0).toBeLessThan(2000 + 500);
    expect(stillBelieving).toEqual([]);
  });
});
