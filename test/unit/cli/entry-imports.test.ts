// What each entry point loads, measured in a child process that records every module it loads
// (test/support/module-trace.ts): the library's two entries and each subcommand of the CLI. A
// subcommand is traced up to the point where it fails for want of a pod identity or a valid flag;
// by then its module graph has been loaded whole, so the trace is what the running command loads
// at start-up. The built package is measured the same way in test/integration/packaging.
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { traceModules } from '../../support/module-trace.ts';

const root = resolve(import.meta.dirname, '../../..');
const main = 'src/cli/main.ts';
const cli = (...args: string[]) => traceModules([main, ...args], { cwd: root });
const library = (entry: string) =>
  traceModules(['--input-type=module', '-e', `await import('./${entry}')`], { cwd: root });
const HANG_BOUND_MS = 60_000;

describe('the modules each entry point loads', () => {
  it(
    'the guards (fencepost/guards): their own files and the token parser, and no package at all',
    async () => {
      const t = await library('src/guards/index.ts');
      expect(t.code, t.stderr).toBe(0);
      expect(t.packages).toEqual([]); // no @kubernetes/client-node, ioredis (a type only), pino or prom-client
      expect(t.files.toSorted()).toEqual([
        'src/guards/http-guard.ts',
        'src/guards/http-resource.ts',
        'src/guards/index.ts',
        'src/guards/postgres-guard.ts',
        'src/guards/redis-fenced-write-lua.ts',
        'src/guards/redis-guard.ts',
        'src/guards/sql-guard.ts',
        'src/protocol/token.ts',
      ]);
    },
    HANG_BOUND_MS,
  );

  it(
    'the library (fencepost): its own transport and logger, and no package: no Kubernetes client, Redis client, metrics, logging library or YAML parser; no controller or CLI code',
    async () => {
      const t = await library('src/index.ts');
      expect(t.code, t.stderr).toBe(0);
      expect(t.packages).toEqual([]); // js-yaml comes with the first YAML kubeconfig; ioredis with the first store
      expect(t.files).toContain('src/observability/logger.ts');
      expect(t.files).toContain('src/client/acquire.ts');
      expect(t.files).toContain('src/transport/client.ts');
      expect(t.files.filter((f) => f.startsWith('src/controllers/') || f.startsWith('src/config/'))).toEqual([]);
      expect(t.files.filter((f) => f.startsWith('src/cli/'))).toEqual([]);
      expect(t.files.filter((f) => f.startsWith('src/kube/'))).toEqual([]);
    },
    HANG_BOUND_MS,
  );

  it.each([
    // main.ts loads UsageError (it decides the exit status by type); a subcommand's --help loads its flag parser, no more.
    { command: 'version', args: ['version'], files: [] },
    { command: '--help', args: ['--help'], files: [] },
    {
      command: 'controller --help',
      args: ['controller', '--help'],
      files: [
        'src/config/controller.ts',
        'src/config/duration.ts',
        'src/config/bind-address.ts',
        'src/config/flags.ts',
        'src/config/log-level.ts',
      ],
    },
    {
      command: 'agent --help',
      args: ['agent', '--help'],
      files: [
        'src/config/agent.ts',
        'src/config/bind-address.ts',
        'src/config/duration.ts', // --app-stop-timeout
        'src/config/flags.ts',
        'src/config/log-level.ts',
      ],
    },
    { command: 'exec --help', args: ['exec', '--help'], files: ['src/cli/exec-usage.ts'] },
  ])(
    'fencepost $command loads no package and only its usage text',
    async ({ args, files }) => {
      const t = await cli(...args);
      expect(t.code, t.stderr).toBe(0);
      expect(t.packages).toEqual([]);
      expect(t.files.toSorted()).toEqual(
        [main, 'src/cli/agent-commands.ts', 'src/cli/dispatch.ts', 'src/config/usage-error.ts', ...files].toSorted(),
      );
    },
    HANG_BOUND_MS,
  );

  it(
    'fencepost agent loads the agent and its own transport, and no @kubernetes/client-node, no ioredis, no prom-client and nothing of the controller or of exec',
    async () => {
      const t = await cli('agent', '--lock', 'billing'); // no POD_NAME: fails after loading
      expect(t.code).not.toBe(0);
      expect(t.packages).not.toContain('@kubernetes/client-node');
      expect(t.packages).not.toContain('ioredis');
      expect(t.packages).not.toContain('prom-client'); // observability/exposition.ts instead (about 11 MiB less)
      expect(t.files).toContain('src/cli/agent.ts');
      expect(t.files).toContain('src/agent/session.ts');
      expect(t.files).toContain('src/transport/informer.ts');
      expect(
        t.files.filter(
          (f) =>
            f.startsWith('src/kube/') && f !== 'src/kube/event-recorder.ts' && f !== 'src/kube/event-correlator.ts',
        ),
      ).toEqual([]);
      expect(t.files.filter((f) => f.startsWith('src/controllers/') || f.startsWith('src/fencing/redis'))).toEqual([]);
      expect(t.files).not.toContain('src/cli/controller.ts');
      expect(t.files).not.toContain('src/cli/exec.ts');
    },
    HANG_BOUND_MS,
  );

  it(
    'fencepost exec loads the library, and no @kubernetes/client-node, no ioredis, no metrics and nothing of the controller or the agent command',
    async () => {
      const t = await cli('exec', '--lock', 'billing', '--', 'true'); // no POD_NAME: fails after loading
      expect(t.code).not.toBe(0);
      expect(t.files).toContain('src/cli/exec.ts');
      expect(t.files).toContain('src/client/acquire.ts');
      expect(t.packages).not.toContain('@kubernetes/client-node');
      expect(t.packages).not.toContain('ioredis');
      expect(t.packages).not.toContain('prom-client');
      expect(t.files.filter((f) => f.startsWith('src/controllers/'))).toEqual([]);
      expect(t.files).not.toContain('src/cli/agent.ts');
      expect(t.files).not.toContain('src/cli/controller.ts');
    },
    HANG_BOUND_MS,
  );

  it(
    'fencepost controller loads the controller and ioredis, no @kubernetes/client-node (its generated API modules are about 20 MiB of source text in the heap), and nothing of the agent or exec commands',
    async () => {
      const t = await cli('controller', '--workers', 'many'); // a bad flag: fails after loading
      expect(t.code).toBe(2);
      expect(t.files).toContain('src/controllers/distributedlock/setup.ts');
      expect(t.packages).toContain('ioredis');
      expect(t.packages).not.toContain('@kubernetes/client-node');
      expect(t.files).not.toContain('src/cli/agent.ts');
      expect(t.files).not.toContain('src/cli/exec.ts');
    },
    HANG_BOUND_MS,
  );

  it(
    'fencepost dashboard loads the dashboard and no @kubernetes/client-node, ioredis or prom-client, and nothing of the controller, the agent or exec',
    async () => {
      const t = await cli('dashboard', '--bogus'); // an unknown flag: fails after loading
      expect(t.code).toBe(2);
      expect(t.files).toContain('src/dashboard/start.ts');
      expect(t.packages).not.toContain('@kubernetes/client-node');
      expect(t.packages).not.toContain('ioredis');
      expect(t.packages).not.toContain('prom-client');
      expect(t.files.filter((f) => f.startsWith('src/controllers/'))).toEqual([]);
      expect(t.files).not.toContain('src/cli/agent.ts');
      expect(t.files).not.toContain('src/cli/exec.ts');
    },
    HANG_BOUND_MS,
  );

  it.each(['status', 'history', 'explain', 'handover', 'release'])(
    "kubectl fencepost %s loads its command and no @kubernetes/client-node, ioredis or prom-client; of the controller only its pure decisions (explain's answers are the controller's own)",
    async (command) => {
      const t = await traceModules(['src/cli/kubectl-fencepost.ts', command, '--bogus'], { cwd: root });
      expect(t.code, t.stderr).not.toBe(0);
      expect(t.files.some((f) => f.startsWith('src/cli/plugin/'))).toBe(true);
      expect(t.packages).not.toContain('@kubernetes/client-node');
      expect(t.packages).not.toContain('ioredis');
      expect(t.packages).not.toContain('prom-client');
      expect(t.files).not.toContain('src/controllers/distributedlock/setup.ts');
      expect(t.files).not.toContain('src/runtime/informer.ts');
    },
    HANG_BOUND_MS,
  );
});
