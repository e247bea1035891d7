/**
 * Usage errors of the real commands, run as child processes (`controller` on Node as
 * `fencepost`, `agent` and `exec` as the shipped `fencepost-agent` executable): every one exits 2 and
 * prints one line naming the flag, for each subcommand — unknown flags, missing and ambiguous
 * values, bad values, stray arguments. And the forms kubebuilder manifests pass are accepted:
 * `--leader-elect` alone, `--leader-elect=false`, `--log-level=warn`.
 *
 * No control plane is needed: an accepted command line is shown by what happens next (the
 * controller goes on to dial the API server, here a port where nothing listens).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { agentBinary } from '../../support/agent-binary.ts';

const main = resolve(import.meta.dirname, '../../../src/cli/main.ts');
const POD = { POD_NAME: 'web-0', POD_NAMESPACE: 'ns', POD_UID: 'uid-0' };

/** agentCommand: `agent` and `exec` run as the shipped executable, `fencepost-agent`; the rest on Node. */
const agentCommand = (args: readonly string[]): boolean => args[0] === 'agent' || args[0] === 'exec';

function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stderr: string }> {
  return new Promise((res) => {
    const { KUBECONFIG: _k, POD_NAME: _n, POD_NAMESPACE: _ns, POD_UID: _u, ...base } = process.env;
    const [file, argv] = agentCommand(args) ? [agentBinary(), args] : [process.execPath, [main, ...args]];
    execFile(file, argv, { timeout: 30_000, env: { ...base, ...env } }, (err, _out, stderr) => {
      res({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stderr });
    });
  });
}

describe('fencepost usage errors', () => {
  it.each([
    { argv: ['controller', '--bogus'], line: '--bogus: unknown flag (see --help)' },
    { argv: ['controller', '--workers'], line: '--workers: missing value (use --workers=VALUE)' },
    {
      argv: ['controller', '--namespace', '--workers', '2'],
      line: '--namespace: ambiguous value "--workers", which looks like a flag; write --namespace=VALUE (the value is missing, or starts with a dash)',
    },
    { argv: ['controller', '--workers', 'many'], line: '--workers: must be a positive integer, got "many"' },
    { argv: ['controller', '--leader-elect', 'maybe'], line: '--leader-elect: must be true or false, got "maybe"' },
    { argv: ['controller', '--leader-elect=yes'], line: '--leader-elect: must be true or false, got "yes"' },
    {
      argv: ['controller', '--log-level', 'trace'],
      line: '--log-level: must be debug, info, warn or error (or silent), got "trace"',
    },
    {
      argv: ['controller', '--cache-sync-timeout', '2'],
      line: '--cache-sync-timeout: invalid duration "2" (use e.g. 500ms, 10s, 2m, 1h30m)',
    },
    {
      argv: ['controller', '--metrics-bind-address', '8080'],
      line: '--metrics-bind-address: expected host:port (e.g. 0.0.0.0:8080 or 127.0.0.1:0), got "8080"',
    },
    { argv: ['controller', 'now'], line: '"now": unexpected argument; this command takes flags only' },
    { argv: ['agent', '--bogus'], env: POD, line: '--bogus: unknown flag (see --help)' },
    { argv: ['agent', '--lock'], env: POD, line: '--lock: missing value (use --lock=VALUE)' },
    {
      argv: ['agent', '--lock', '--listen', '127.0.0.1:7000'],
      env: POD,
      line: '--lock: ambiguous value "--listen", which looks like a flag; write --lock=VALUE (the value is missing, or starts with a dash)',
    },
    {
      argv: ['agent', '--lock', 'db', '--log-level', 'verbose'],
      env: POD,
      line: '--log-level: must be debug, info, warn or error (or silent), got "verbose"',
    },
    {
      argv: ['agent', '--lock', 'db', '--health-probe-bind-address', 'localhost'],
      env: POD,
      line: '--health-probe-bind-address: expected host:port (e.g. 0.0.0.0:8080 or 127.0.0.1:0), got "localhost"',
    },
    {
      argv: ['agent', '--lock', 'db'],
      env: {},
      line: 'POD_NAME: not set; pass it from the downward API (fieldRef metadata.name)',
    },
    { argv: ['exec', '--bogus', '--', 'true'], env: POD, line: '--bogus: unknown flag (see --help)' },
    { argv: ['exec', '--lock', '--', 'true'], env: POD, line: '--lock: missing value (use --lock=VALUE)' },
    {
      argv: ['exec', '--lock', '--wait', '5s', '--', 'true'],
      env: POD,
      line: '--lock: ambiguous value "--wait", which looks like a flag; write --lock=VALUE (the value is missing, or starts with a dash)',
    },
    {
      argv: ['exec', '--lock', 'db', '--wait', 'soon', '--', 'true'],
      env: POD,
      line: '--wait: invalid duration "soon" (use e.g. 500ms, 10s, 2m, 1h30m)',
    },
    {
      argv: ['exec', '--lock', 'db', '--log-level', 'loud', '--', 'true'],
      env: POD,
      line: '--log-level: must be debug, info, warn or error (or silent), got "loud"',
    },
    {
      argv: ['exec', '--lock', 'db', 'true'],
      env: POD,
      line: '--: missing, or no command after it; usage: fencepost exec --lock NAME [--lock NAME...] -- CMD [ARGS...]',
    },
    {
      argv: ['exec', '--lock', 'db', '--if-held', 'never', '--', 'true'],
      env: POD,
      line: '--if-held: must be wait, skip or fail, got "never"',
    },
    {
      argv: ['exec', '--lock', 'db', '--lock', 'db', '--', 'true'],
      env: POD,
      line: '--lock: "db" is given twice',
    },
    {
      argv: ['exec', '--lock', 'db.main', '--lock', 'db-main', '--', 'true'],
      env: POD,
      line: '--lock: "db.main" and "db-main" would both set FENCEPOST_TOKEN_DB_MAIN; give locks whose names differ in more than case and punctuation',
    },
  ])('$argv exits 2: $line', async ({ argv, env, line }) => {
    const r = await run(argv, env);
    expect(r.code, r.stderr).toBe(2);
    const program = agentCommand(argv) ? 'fencepost-agent' : 'fencepost';
    expect(r.stderr.trimEnd().split('\n')).toEqual([`${program}: ${line}`]);
  });

  describe('accepts the forms kubebuilder manifests pass', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fencepost-usage-'));
    afterAll(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    // Port 2: nothing listens there (see controller/cli.test.ts); the controller's next step after
    // parsing its flags is to dial the API server, so this line proves the flags were accepted.
    const kc = join(dir, 'kubeconfig');
    writeFileSync(
      kc,
      'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:2"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n',
    );
    const rest = ['--kubeconfig', kc, '--metrics-bind-address', '0', '--health-probe-bind-address', '0'];

    it.each([
      ['--leader-elect'],
      ['--leader-elect=false'],
      ['--leader-elect=true'],
      ['--leader-elect', 'false'],
      ['--log-level=warn', '--leader-elect'],
    ])('controller %s', async (...flags) => {
      const r = await run(['controller', ...flags, ...rest]);
      expect(r.stderr.trimEnd().split('\n')).toEqual([
        'fencepost: cannot reach the API server at https://127.0.0.1:2: connect ECONNREFUSED 127.0.0.1:2',
      ]);
    });
  });
});
