#!/usr/bin/env node
/**
 * The `fencepost` command (Node): `fencepost controller|agent|exec|version`. The sidecar image
 * runs the same agent and exec code compiled by Bun into `fencepost-agent` (src/cli/agent-main.ts).
 */
import { run } from './dispatch.ts';

run('fencepost', ['controller', 'agent', 'exec', 'version']);
