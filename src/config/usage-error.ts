/**
 * UsageError: the command line (or an environment variable the command reads as part of it) is
 * wrong — an unknown flag, a flag without its value, a value that does not parse, a missing
 * required flag. Every flag parser of the `fencepost` command throws this and nothing else for
 * bad input, so the CLI decides its exit status by type (`instanceof UsageError`), never by
 * matching message text.
 */
export class UsageError extends Error {
  /**
   * exitCode is 2, the status of bad usage: getopt and the shells' builtins use it, and so do Go's
   * `flag` and `spf13/pflag` with ExitOnError — what a kubebuilder operator's `main` exits with on
   * a bad flag.
   */
  readonly exitCode = 2;
  /** flag names what was wrong: `--workers`, `--`, or an environment variable such as `POD_NAME`. */
  readonly flag: string;

  /**
   * The message is one line, `<flag>: <problem>` (e.g. `--workers: must be a positive integer, got
   * "x"`): the CLI prints it as is after `fencepost: `. Line breaks in `problem` are replaced with
   * spaces so that the promise of one line holds for any value a user typed.
   */
  constructor(flag: string, problem: string) {
    super(`${flag}: ${problem}`.replace(/\r?\n/g, ' '));
    this.name = 'UsageError';
    this.flag = flag;
  }
}
