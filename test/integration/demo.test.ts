import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ActSummary, DemoSummary } from '../../hack/demo/summary.ts';

const root = resolve(import.meta.dirname, '../..');

/** runDemo runs `node hack/demo.ts --json` and returns its exit code, stdout and stderr. */
function runDemo(timeoutMs: number): Promise<{ code: number | string; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [resolve(root, 'hack/demo.ts'), '--json'], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr += c;
    });
    // SIGTERM makes the demo tear down what it started; SIGKILL if it does not.
    const term = setTimeout(() => {
      child.kill('SIGTERM');
    }, timeoutMs);
    const kill = setTimeout(() => {
      child.kill('SIGKILL');
    }, timeoutMs + 20_000);
    child.on('error', fail);
    child.on('exit', (code, sig) => {
      clearTimeout(term);
      clearTimeout(kill);
      done({ code: code ?? sig ?? 'unknown', stdout, stderr });
    });
  });
}

/** acceptedTokens lists the tokens of the accepted writes of an act, in the order they happened. */
const acceptedTokens = (a: ActSummary): bigint[] => a.writes.filter((w) => w.accepted).map((w) => BigInt(w.token));

// The newcomer demo end to end: its own control plane, Redis, controller, agent and worker
// processes, two SIGSTOP pauses. The assertions are the story it tells.
describe('npm run demo', () => {
  it(
    "shows a paused holder's stale write rejected by the guard, and the same write corrupting the ledger without it",
    { timeout: 150_000 },
    async () => {
      const run = await runDemo(120_000);
      expect(run.code, run.stderr).toBe(0);
      const s = JSON.parse(run.stdout) as DemoSummary;

      // Tokens strictly increase, one per grant: worker-a/b, then the other, then back.
      const issued = s.tokensIssued.map((g) => BigInt(g.token));
      expect(issued.length).toBeGreaterThanOrEqual(3);
      for (let i = 1; i < issued.length; i++) expect(issued[i]).toBeGreaterThan(issued[i - 1] ?? 0n);

      const g = s.withGuard;
      expect(g.guard).toBe(true);
      expect(g.pausedPod).not.toBe(g.newHolder);
      expect(BigInt(g.newToken)).toBeGreaterThan(BigInt(g.pausedToken));
      // The paused worker's write with the old token was refused, and nothing was accepted out of order.
      expect(g.staleRejected).toBeGreaterThanOrEqual(1);
      expect(g.staleAccepted).toBe(0);
      const rejected = g.writes.filter((w) => !w.accepted);
      expect(
        rejected.every((w) => w.pod === g.pausedPod && w.token === g.pausedToken && w.highWater === g.newToken),
      ).toBe(true);
      const accepted = acceptedTokens(g);
      for (let i = 1; i < accepted.length; i++) expect(accepted[i]).toBeGreaterThanOrEqual(accepted[i - 1] ?? 0n);
      expect(g.acceptedPerToken[g.pausedToken]).toBeGreaterThanOrEqual(1);
      expect(g.acceptedPerToken[g.newToken]).toBeGreaterThanOrEqual(1);
      // The ledger holds the newest holder's write, right after the wake-up and at the end.
      expect(g.latestToken).toBe(g.newToken);
      expect(g.ledgerAfterWake).toBe(`written by ${g.newHolder} with token ${g.newToken}`);
      expect(g.finalLedger).toBe(`written by ${g.newHolder} with token ${g.latestToken}`);

      const u = s.withoutGuard;
      expect(u.guard).toBe(false);
      expect(BigInt(u.newToken)).toBeGreaterThan(BigInt(u.pausedToken));
      // Without the guard the stale write went through after a newer token's write: the corruption.
      expect(u.staleRejected).toBe(0);
      expect(u.staleAccepted).toBeGreaterThanOrEqual(1);
      const newer = u.writes.findIndex((w) => w.accepted && w.token === u.newToken);
      const corrupt = u.writes.findIndex(
        (w, i) => i > newer && w.accepted && w.pod === u.pausedPod && BigInt(w.token) < BigInt(u.newToken),
      );
      expect(newer).toBeGreaterThanOrEqual(0);
      expect(corrupt).toBeGreaterThan(newer);
      expect(u.overwritten).toContain(`written by ${u.newHolder} with token ${u.newToken}`);
      expect(u.ledgerAfterWake).toBe(`written by ${u.pausedPod} with token ${u.pausedToken}`);

      expect(s.elapsedSeconds).toBeLessThan(60);
    },
  );
});
