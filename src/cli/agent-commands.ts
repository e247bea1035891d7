/** The commands both executables offer: the in-pod agent and exec (src/cli/dispatch.ts). */
import type { Command } from './dispatch.ts';

export const AGENT: Command = {
  summary: "run the in-pod sidecar that renews this pod's locks (see: PROGRAM agent --help)",
  usage: async () => (await import('../config/agent.ts')).AGENT_USAGE,
  run: async (argv) => (await import('./agent.ts')).runAgent(argv),
};

export const EXEC: Command = {
  summary: 'run a command only while this pod holds a lock (see: PROGRAM exec --help)',
  usage: async () => (await import('./exec-usage.ts')).EXEC_USAGE,
  run: async (argv) => (await import('./exec.ts')).runExec(argv),
  helpOnlyFirst: true,
};
