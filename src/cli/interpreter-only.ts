/**
 * runInterpreterOnly makes the compiled agent run JavaScriptCore without its JIT: the agent renews
 * a Lease every few seconds and answers a few local requests, which the interpreter serves as fast
 * as the network allows, while each JIT tier keeps an executable-memory pool and compiled code in
 * every sidecar's private memory (bench/agent-footprint.ts; docs/benchmarks.md, "Agent").
 *
 * JavaScriptCore reads its options once, from `BUN_JSC_*` variables, before any of the bundle runs,
 * and Bun offers no build option to set `useJIT`; so the executable replaces itself (execve: same
 * PID, same open files, nothing forked) with itself and `BUN_JSC_useJIT=0` in its environment.
 * A marker variable tells the second start that it is the replacement; it removes both, so a
 * program that `fencepost-agent exec` starts inherits the environment the user gave. When the user
 * set `BUN_JSC_useJIT` themselves (either way), their setting stands and nothing is replaced.
 *
 * Only in the Bun-compiled executable (its entry module lives under Bun's `/$bunfs/` root): under
 * Node or `bun run` nothing happens.
 */
const JIT_VAR = 'BUN_JSC_useJIT';
const MARKER = 'FENCEPOST_AGENT_INTERPRETER_ONLY';

/** ProcessSeam is the part of `process` this needs (a seam for unit tests). */
export interface ProcessSeam {
  readonly argv: readonly string[];
  readonly execPath: string;
  readonly env: Record<string, string | undefined>;
  readonly execve?: (file: string, args: readonly string[], env: Record<string, string | undefined>) => void;
}

/**
 * runInterpreterOnly replaces the process as above, or returns when it is the replacement, the
 * user chose, or this is not the compiled agent (or the runtime cannot execve, or execve fails:
 * then the JIT stays).
 */
export function runInterpreterOnly(p: ProcessSeam = process): void {
  if (p.env[MARKER] === '1') {
    delete p.env[MARKER];
    delete p.env[JIT_VAR];
    return;
  }
  if (p.env[JIT_VAR] !== undefined) return;
  if (p.argv[1]?.startsWith('/$bunfs/') !== true || p.execve === undefined) return;
  try {
    p.execve(p.execPath, [p.execPath, ...p.argv.slice(2)], { ...p.env, [JIT_VAR]: '0', [MARKER]: '1' });
  } catch {
    // The executable could not be run again (its file replaced or gone, a seccomp policy): the agent
    // works the same with the JIT, at a little more memory, so it goes on rather than fail.
  }
}
