/**
 * The command dispatch shared by the two executables: `fencepost` (src/cli/main.ts: every command,
 * run by Node) and `fencepost-agent` (src/cli/agent-main.ts: agent, exec and version only, compiled
 * by Bun into one file; see hack/build-agent.ts). Exit codes: 0 success, 1 runtime failure, 2 bad
 * usage.
 *
 * Each command's code is imported only when that command runs, and its --help text from a module
 * that imports nothing heavy: `fencepost agent` never loads the controller or ioredis,
 * `fencepost exec --help` no Kubernetes client (test/unit/cli/entry-imports.test.ts measures it).
 * In the compiled agent the controller is not even bundled (hack/build-agent.ts checks the bundle).
 */
import { UsageError } from '../config/usage-error.ts';

/** Command is a subcommand name. */
export type Command = 'controller' | 'agent' | 'exec' | 'version';

const SUMMARY: Readonly<Record<Command, string>> = {
  controller: 'run the DistributedLock controller (see: PROGRAM controller --help)',
  agent: "run the in-pod sidecar that renews this pod's locks (see: PROGRAM agent --help)",
  exec: 'run a command only while this pod holds a lock (see: PROGRAM exec --help)',
  version: 'print the version',
};

/** VERSION is the release both executables print. */
export const VERSION = '0.1.0';

/** usageOf is the top-level help of an executable with these commands. */
export function usageOf(program: string, commands: readonly Command[]): string {
  const lines = commands.map((c) => `  ${c.padEnd(12)} ${SUMMARY[c].replace('PROGRAM', program)}`);
  return `Usage: ${program} <command> [flags]\n\nCommands:\n${lines.join('\n')}\n`;
}

/** dispatch runs one command line of `program`, which offers `commands`; resolves with the exit code. */
export async function dispatch(
  program: string,
  commands: readonly Command[],
  argv: readonly string[],
): Promise<number> {
  const [cmd, ...rest] = argv;
  const usage = usageOf(program, commands);
  const help = rest.includes('--help') || rest.includes('-h');
  const offered = (c: Command): boolean => commands.includes(c);
  switch (cmd) {
    case 'controller':
      if (!offered(cmd)) break;
      if (help) {
        process.stdout.write((await import('../config/controller.ts')).CONTROLLER_USAGE);
        return 0;
      }
      return await (await import('./controller.ts')).runController(rest);
    case 'agent':
      if (!offered(cmd)) break;
      if (help) {
        process.stdout.write((await import('../config/agent.ts')).AGENT_USAGE);
        return 0;
      }
      return await (await import('./agent.ts')).runAgent(rest);
    case 'exec':
      if (!offered(cmd)) break;
      // Only a leading --help is exec's own: after the flags comes the user's command and its flags.
      if (rest[0] === '--help' || rest[0] === '-h') {
        process.stdout.write((await import('./exec-usage.ts')).EXEC_USAGE);
        return 0;
      }
      return await (await import('./exec.ts')).runExec(rest);
    case 'version':
      process.stdout.write(`${program} ${VERSION}\n`);
      return 0;
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      process.stdout.write(usage);
      return cmd === undefined ? 2 : 0;
  }
  process.stderr.write(`${program}: unknown command ${JSON.stringify(cmd)}\n\n${usage}`);
  return 2;
}

/** run dispatches process.argv and sets the process's exit code; an escaping error is one line on stderr. */
export function run(program: string, commands: readonly Command[]): void {
  dispatch(program, commands, process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`${program}: ${err instanceof Error ? err.message : String(err)}\n`);
      // Bad usage is known by its type (every flag parser throws UsageError), never by its text. An
      // error that carries its own numeric exitCode (the controller's StartupError) keeps it; any
      // other failure is 1.
      const own = (err as { exitCode?: unknown } | null | undefined)?.exitCode;
      process.exitCode = err instanceof UsageError ? err.exitCode : typeof own === 'number' ? own : 1;
    },
  );
}
