/**
 * traceModules runs `node <args>` in a child process with test/support/module-trace-hook.ts
 * preloaded and returns every module the process loaded: which files of ours, and which npm
 * packages. It measures what an entry point really pulls in (static imports, dynamic imports that
 * ran, require()s inside CommonJS packages), not what the source seems to import.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HOOK = pathToFileURL(join(import.meta.dirname, 'module-trace-hook.ts')).href;

/** ModuleTrace is what one traced process loaded, with its exit code and output. */
export interface ModuleTrace {
  /** modules are all the loaded files, in load order, relative to `root`. */
  readonly modules: readonly string[];
  /** files are the loaded files outside node_modules, relative to `root` (e.g. `src/cli/main.ts`). */
  readonly files: readonly string[];
  /** packages are the npm packages loaded from any node_modules (e.g. `@kubernetes/client-node`), sorted. */
  readonly packages: readonly string[];
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** TraceOptions: the child's working directory, the folder `files` are relative to, and its environment. */
export interface TraceOptions {
  readonly cwd: string;
  readonly root?: string;
  /** env replaces the child's environment (PATH is kept); the default is a bare one. */
  readonly env?: Readonly<Record<string, string>>;
  /** timeoutMs kills a child that hangs (a bound on hangs, not a measurement). Defaults to 60 s. */
  readonly timeoutMs?: number;
}

/** packageOf names the npm package a node_modules path belongs to, or undefined outside node_modules. */
export function packageOf(path: string): string | undefined {
  const m = /.*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path);
  return m?.[1];
}

/** traceModules runs node with `args` (a script and its arguments, or `-e CODE`) and traces its modules. */
export async function traceModules(args: readonly string[], opts: TraceOptions): Promise<ModuleTrace> {
  const dir = mkdtempSync(join(tmpdir(), 'fencepost-trace-'));
  const out = join(dir, 'modules.txt');
  try {
    const env = { PATH: process.env['PATH'] ?? '', ...opts.env, FENCEPOST_MODULE_TRACE: out };
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
      (resolve) => {
        execFile(
          process.execPath,
          ['--import', HOOK, ...args],
          { cwd: opts.cwd, env, timeout: opts.timeoutMs ?? 60_000, encoding: 'utf8' },
          (err, so, se) => {
            const c = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
            resolve({ code: c, stdout: so, stderr: se });
          },
        );
      },
    );
    let text: string;
    try {
      text = readFileSync(out, 'utf8');
    } catch (err) {
      throw new Error(`node ${args.join(' ')} exited ${String(code)} without a module trace: ${stderr}`, {
        cause: err,
      });
    }
    const urls = text.split('\n').filter((u) => u.startsWith('file:'));
    const paths = urls.map((u) => fileURLToPath(u));
    const root = opts.root ?? opts.cwd;
    return {
      modules: paths.map((p) => relative(root, p)),
      files: paths.filter((p) => packageOf(p) === undefined).map((p) => relative(root, p)),
      packages: [...new Set(paths.map(packageOf).filter((p) => p !== undefined))].sort(),
      code,
      stdout,
      stderr,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
