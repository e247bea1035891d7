#!/usr/bin/env node
/**
 * The `fencepost` command: `fencepost controller|agent|exec|version`.
 * Exit codes: 0 success, 1 runtime failure, 2 bad usage.
 *
 * Each subcommand's code is imported only when that subcommand runs, and its --help text from a
 * module that imports nothing heavy: `fencepost agent` never loads the controller or ioredis,
 * `fencepost exec --help` no Kubernetes client (test/unit/cli/entry-imports.test.ts measures it).
 */
import { UsageError } from '../config/usage-error.ts';

const USAGE = `Usage: fencepost <command> [flags]

Commands:
  controller   run the DistributedLock controller (see: fencepost controller --help)
  agent        run the in-pod sidecar that renews this pod's locks (see: fencepost agent --help)
  exec         run a command only while this pod holds a lock (see: fencepost exec --help)
  version      print the version
`;

async function main(argv: readonly string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'controller':
      if (rest.includes('--help') || rest.includes('-h')) {
        process.stdout.write((await import('../config/controller.ts')).CONTROLLER_USAGE);
        return 0;
      }
      return await (await import('./controller.ts')).runController(rest);
    case 'agent':
      if (rest.includes('--help') || rest.includes('-h')) {
        process.stdout.write((await import('../config/agent.ts')).AGENT_USAGE);
        return 0;
      }
      return await (await import('./agent.ts')).runAgent(rest);
    case 'exec':
      if (rest[0] === '--help' || rest[0] === '-h') {
        process.stdout.write((await import('./exec-usage.ts')).EXEC_USAGE);
        return 0;
      }
      return await (await import('./exec.ts')).runExec(rest);
    case 'version':
      process.stdout.write('fencepost 0.1.0\n');
      return 0;
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      process.stdout.write(USAGE);
      return cmd === undefined ? 2 : 0;
    default:
      process.stderr.write(`fencepost: unknown command ${JSON.stringify(cmd)}\n\n${USAGE}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`fencepost: ${err instanceof Error ? err.message : String(err)}\n`);
    // Bad usage is known by its type (every flag parser throws UsageError), never by its text. An
    // error that carries its own numeric exitCode (the controller's StartupError) keeps it; any
    // other failure is 1.
    const own = (err as { exitCode?: unknown } | null | undefined)?.exitCode;
    process.exitCode = err instanceof UsageError ? err.exitCode : typeof own === 'number' ? own : 1;
  },
);
