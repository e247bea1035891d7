/**
 * child-only-exec.ts — CALIBRATION ONLY: `fencepost exec` as it was before it stopped whole process
 * trees: every signal goes to the command's direct child alone, and exec considers the command gone
 * once that child exited, whatever it left running. The command still starts in a process group of
 * its own (detached), so that the trial can find and stop what survives. The `exec-tree` trials
 * must count tree writes after the successor's grant, or tree processes left alive. Used only by
 * `--calibrate child-only` runs.
 *
 *   node test/safety/faults/child-only-exec.ts --lock NAME ... -- CMD [ARGS...]   (exec's flags)
 */
import { spawn } from 'node:child_process';
import { runExec } from '../../../src/cli/exec.ts';
import type { CommandGroup } from '../../../src/cli/process-group.ts';

/** childOnly: spawnGroup's interface, acting on the direct child only. */
function childOnly(cmd: string, args: readonly string[], env: NodeJS.ProcessEnv): CommandGroup {
  const child = spawn(cmd, args, { stdio: 'inherit', detached: true, env });
  const running = (): boolean => child.exitCode === null && child.signalCode === null;
  return {
    child,
    signal: (sig) => {
      if (running()) child.kill(sig);
    },
    alive: running,
    emptied: async (withinMs) => {
      const deadline = performance.now() + withinMs;
      while (running()) {
        if (performance.now() >= deadline) return false;
        await new Promise((r) => setTimeout(r, 20));
      }
      return true;
    },
  };
}

process.exitCode = await runExec(process.argv.slice(2), childOnly);
