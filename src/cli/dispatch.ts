/**
 * The command dispatch shared by the two executables: `fencepost` (src/cli/main.ts: every command,
 * run by Node) and `fencepost-agent` (src/cli/agent-main.ts: agent, exec and version only, compiled
 * by Bun into one file; see hack/build-agent.ts). Exit codes: 0 success, 1 runtime failure, 2 bad
 * usage.
 *
 * Each entry point hands in the commands it offers as loaders: a command's code is imported only
 * when that command runs, and its --help text from a module that imports nothing heavy
 * (test/unit/cli/entry-imports.test.ts measures it). This module imports no command itself, so a
 * bundler that follows every `import()` (Bun's does) bundles only the commands an entry names:
 * the agent executable holds no controller (test/unit/cli/agent-bundle.test.ts).
 */
import { UsageError } from '../config/usage-error.ts';

/** Command is what an entry point offers for one subcommand. */
export interface Command {
  /** summary: one line for the top-level help; PROGRAM stands for the executable's name. */
  readonly summary: string;
  /** usage loads the subcommand's --help text. */
  readonly usage: () => Promise<string>;
  /** run loads and runs the subcommand; resolves with its exit code. */
  readonly run: (argv: readonly string[]) => Promise<number>;
  /**
   * helpOnlyFirst: only a leading --help is the command's own (exec: after its flags come the
   * user's command and that command's flags). Defaults to false: --help anywhere.
   */
  readonly helpOnlyFirst?: boolean;
}

/** VERSION is the release both executables print. */
export const VERSION = '0.1.0';

/** usageOf is the top-level help of an executable with these commands. */
export function usageOf(program: string, commands: Readonly<Record<string, Command>>): string {
  const lines = Object.entries(commands).map(
    ([name, c]) => `  ${name.padEnd(12)} ${c.summary.replace('PROGRAM', program)}`,
  );
  lines.push(`  ${'version'.padEnd(12)} print the version`);
  return `Usage: ${program} <command> [flags]\n\nCommands:\n${lines.join('\n')}\n`;
}

/** dispatch runs one command line of `program`; resolves with the exit code. */
export async function dispatch(
  program: string,
  commands: Readonly<Record<string, Command>>,
  argv: readonly string[],
): Promise<number> {
  const [name, ...rest] = argv;
  const usage = usageOf(program, commands);
  const command = name !== undefined && Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (command !== undefined) {
    const help =
      command.helpOnlyFirst === true
        ? rest[0] === '--help' || rest[0] === '-h'
        : rest.includes('--help') || rest.includes('-h');
    if (help) {
      process.stdout.write(await command.usage());
      return 0;
    }
    return await command.run(rest);
  }
  switch (name) {
    case 'version':
      process.stdout.write(`${program} ${VERSION}\n`);
      return 0;
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      process.stdout.write(usage);
      return name === undefined ? 2 : 0;
  }
  process.stderr.write(`${program}: unknown command ${JSON.stringify(name)}\n\n${usage}`);
  return 2;
}

/** run dispatches process.argv and sets the process's exit code; an escaping error is one line on stderr. */
export function run(program: string, commands: Readonly<Record<string, Command>>): void {
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
