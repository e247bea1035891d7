/**
 * A VM pause as the guest's clocks see it, for a real process: `buildMonotonicStall` compiles
 * native/monotonic-stall.c (an LD_PRELOAD shim) with the system's C compiler into a temporary
 * directory; a process started with its `env` has monotonic clocks (performance.now(), Node's timers)
 * that stand still between `stall()` and `resume()` while its wall clock runs on.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const source = resolve(import.meta.dirname, 'native/monotonic-stall.c');

/** MonotonicStall controls the monotonic clocks of processes started with its env. */
export interface MonotonicStall {
  /** env: LD_PRELOAD and the control file's name, to add to a process's environment. */
  readonly env: Readonly<Record<string, string>>;
  stall(): void;
  resume(): void;
  /** remove deletes the shim and its directory (resumes first). */
  remove(): void;
}

/** buildMonotonicStall builds the shim, or returns why it cannot (no C compiler, a failed build). */
export function buildMonotonicStall(): MonotonicStall | { readonly unavailable: string } {
  const dir = mkdtempSync(join(tmpdir(), 'fencepost-monotonic-stall-'));
  const lib = join(dir, 'monotonic-stall.so');
  const cc = process.env.CC ?? 'cc';
  const built = spawnSync(cc, ['-shared', '-fPIC', '-O2', '-o', lib, source, '-ldl', '-lpthread'], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (built.error !== undefined || built.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    const why = built.error?.message ?? built.stderr.trim();
    return { unavailable: `cannot build the monotonic-clock shim with ${cc}: ${why}` };
  }
  const control = join(dir, 'stalled');
  const resume = (): void => {
    rmSync(control, { force: true });
  };
  return {
    env: { LD_PRELOAD: lib, FP_MONOTONIC_STALL_FILE: control },
    stall: () => {
      writeFileSync(control, '');
    },
    resume,
    remove: () => {
      resume();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
