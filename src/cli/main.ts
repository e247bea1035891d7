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
  exec: EXEC,
});
