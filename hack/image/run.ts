/**
 * run: one command of the image and release scripts (hack/image/build.ts, hack/image/cross-arch.ts,
 * hack/release.ts), synchronously, its output captured. A failure throws with the command line
 * and the last lines of what it printed: these commands (buildah, mmdebstrap, syft, cosign) say
 * why on standard error, and the whole of it can run to megabytes.
 */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');

/** RunOptions: where to run (default: the repository) and variables added to this process's environment. */
export interface RunOptions {
  readonly cwd?: string;
  readonly env?: NodeJS.ProcessEnv;
}

/** run runs cmd with args and returns its standard output; throws when it exits other than 0. */
export function run(cmd: string, args: readonly string[], opts: RunOptions = {}): string {
  const r = spawnSync(cmd, args, {
    cwd: opts.cwd ?? ROOT,
    env: { ...process.env, ...opts.env },
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (r.status !== 0)
    throw new Error(
      `${cmd} ${args.join(' ')} exited ${String(r.status ?? r.signal)}:\n${(r.stderr || r.stdout).split('\n').slice(-30).join('\n')}`,
    );
  return r.stdout;
}
