/**
 * The process group of `fencepost exec`'s command. The command is spawned `detached` — on POSIX
 * Node calls setsid(), so the command leads a new session and a new process group whose id is
 * its PID — and every signal exec sends goes to that group (`kill(-pgid, sig)`): the shell of
 * `sh -c '…'`, `npm run` and every stage of a pipeline get it, and so do their children, which
 * the direct child alone would not pass on.
 *
 * Not covered, and why:
 * - A descendant that leaves the group (setsid(), setpgid(), a shell with job control `set -m`,
 *   which puts each job in a group of its own) is out of reach: POSIX offers no other handle on
 *   a process tree, and Node exposes neither cgroups nor PR_SET_CHILD_SUBREAPER.
 * - When exec is PID 1 (a container whose entrypoint is `fencepost exec`), the group's orphans
 *   are reparented to exec, and Node cannot reap them: libuv waitpid()s only the PIDs it spawned
 *   and Node has no waitpid(-1). They are signalled like the rest (reparenting keeps the group),
 *   but once dead they stay zombies until exec exits — which, as PID 1, takes the whole PID
 *   namespace with it. A zombie also keeps the group "non-empty" to kill(-pgid, 0), so a wait
 *   for an empty group runs to its bound. Run exec under a tiny init (tini, `docker --init`) or
 *   with `shareProcessNamespace: true` (README, "Jobs").
 */
import { spawn, type ChildProcess } from 'node:child_process';

/** CommandGroup is a spawned command and the process group it leads. */
export interface CommandGroup {
  readonly child: ChildProcess;
  /**
   * signal sends sig to every process of the group; a no-op when the group is empty (ESRCH) or
   * the spawn failed. The group id is the leader's PID, which the kernel does not reuse while
   * any member of the group is alive.
   */
  signal(sig: NodeJS.Signals): void;
  /** alive: some process of the group still exists (zombies count: kill(2) cannot tell them apart). */
  alive(): boolean;
  /** emptied resolves true once the group is empty, or false when withinMs passed first (polled every 20 ms). */
  emptied(withinMs: number): Promise<boolean>;
}

/** spawnGroup starts cmd as the leader of a new session and process group, with stdio inherited. */
export function spawnGroup(cmd: string, args: readonly string[], env: NodeJS.ProcessEnv): CommandGroup {
  // detached: setsid() in the child. The command also leaves exec's controlling terminal, so a
  // terminal's Ctrl-C, Ctrl-\ and hangup reach only exec, which forwards them to the group.
  const child = spawn(cmd, args, { stdio: 'inherit', detached: true, env });
  const pgid = child.pid;
  const kill = (sig: NodeJS.Signals | 0): boolean => {
    if (pgid === undefined) return false;
    try {
      process.kill(-pgid, sig);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
      throw err;
    }
  };
  const alive = (): boolean => kill(0);
  return {
    child,
    signal: (sig) => {
      kill(sig);
    },
    alive,
    emptied: async (withinMs) => {
      const deadline = performance.now() + withinMs;
      while (alive()) {
        if (performance.now() >= deadline) return false;
        await new Promise((r) => setTimeout(r, Math.min(20, Math.max(1, deadline - performance.now()))));
      }
      return true;
    },
  };
}
