#!/usr/bin/env node
/**
 * The `fencepost` command (Node): `fencepost controller|agent|exec|dashboard|version`. The sidecar image
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
  // On Node, the agent's store locks and exec's --store run on ioredis (stores/open.ts): provided
  // here, lazily, and not in agent-commands.ts, so that the compiled fencepost-agent (which uses
  // Bun's built-in client: src/cli/agent-main.ts) bundles no Redis library.
  agent: {
    ...AGENT,
    run: async (argv) => {
      (await import('../client/store-loader.ts')).provideStores(() => import('../stores/open.ts'));
      return AGENT.run(argv);
    },
  },
  exec: {
    ...EXEC,
    run: async (argv) => {
      (await import('../client/store-loader.ts')).provideStores(() => import('../stores/open.ts'));
      return EXEC.run(argv);
    },
  },
  dashboard: {
    summary: 'a read-only web page of every lock, live (see: PROGRAM dashboard --help)',
    usage: async () => (await import('../config/dashboard.ts')).DASHBOARD_USAGE,
    run: async (argv) => (await import('./dashboard.ts')).runDashboard(argv),
  },
});
