#!/usr/bin/env node
/**
 * The `fencepost` command (Node): `fencepost controller|agent|exec|version`. The sidecar image
 * runs the same agent and exec code compiled by Bun into `fencepost-agent` (src/cli/agent-main.ts).
 */
import { AGENT, EXEC } from './agent-commands.ts';
import { run } from './dispatch.ts';

run('fencepost', {
  controller: {
    summary: 'run the DistributedLock controller (see: PROGRAM controller --help)',
    usage: async () => (await import('../config/controller.ts')).CONTROLLER_USAGE,
    run: async (argv) => (await import('./controller.ts')).runController(argv),
  },
  agent: AGENT,
  // On Node, exec may hold its locks in a Redis or Redlock store (--store): provided here, lazily,
  // and not in agent-commands.ts, so that the compiled fencepost-agent bundles no Redis client.
  exec: {
    ...EXEC,
    run: async (argv) => {
      (await import('../client/store-loader.ts')).provideStores(() => import('../stores/open.ts'));
      return EXEC.run(argv);
    },
  },
});
