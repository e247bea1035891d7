import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const main = resolve(import.meta.dirname, '../../../src/cli/main.ts');

function run(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((res) => {
    execFile(process.execPath, [main, ...args], { timeout: 30_000 }, (err, _out, stderr) => {
      res({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stderr });
    });
  });
}

describe('fencepost controller start-up errors', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fencepost-cli-'));
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('exits 2 with one line naming the API server when it cannot be reached', async () => {
    // Port 2: nothing listens there, and no test can take it meanwhile (an ephemeral port from
    // freePort could be handed to another test's proxy before the controller connects). Not port
    // 1: fetch refuses it outright ("bad port") without connecting.
    const port = 2;
    const kc = join(dir, 'kubeconfig');
    writeFileSync(
      kc,
      `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:${port}"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n`,
    );
    const r = await run([
      'controller',
      '--kubeconfig',
      kc,
      '--metrics-bind-address',
      '0',
      '--health-probe-bind-address',
      '0',
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([
      `fencepost: cannot reach the API server at https://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}`,
    ]);
  });

  it('exits 2 naming a bad flag and its value', async () => {
    const r = await run(['controller', '--workers', 'many']);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe('fencepost: --workers: must be a positive integer, got "many"');
  });

  it('documents every flag in --help', async () => {
    const out = await new Promise<string>((res) => {
      execFile(process.execPath, [main, 'controller', '--help'], (_e, stdout) => {
        res(stdout);
      });
    });
    for (const flag of [
      '--kubeconfig',
      '--redis-url',
      '--namespace',
      '--workers',
      '--metrics-bind-address',
      '--health-probe-bind-address',
      '--leader-elect',
      '--leader-election-namespace',
      '--leader-election-id',
      '--leader-election-lease-duration',
      '--leader-election-renew-deadline',
      '--leader-election-retry-period',
      '--identity',
      '--cache-sync-timeout',
      '--log-level',
    ]) {
      expect(out).toContain(flag);
    }
  });
});
