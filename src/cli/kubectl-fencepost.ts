#!/usr/bin/env node
/**
 * `kubectl-fencepost`, the kubectl plugin: kubectl runs an executable named kubectl-<name> found
 * on PATH for `kubectl <name> …`, handing it every word after the name (npm installs this one as
 * the package's `kubectl-fencepost` bin). Read-only commands: status, history, explain; commands
 * that change a lock, through annotations on it that the controller acts on: handover,
 * release --force.
 *
 * The command table is the shared dispatch's (dispatch.ts): each command loads its code only
 * when it runs, with its own flag spec in plugin/usage.ts.
 */
import { run, type Command } from './dispatch.ts';

/** PLUGIN_COMMANDS: the plugin's commands, in the order --help lists them. */
const PLUGIN_COMMANDS: Readonly<Record<string, Command>> = {
  status: {
    summary: 'who holds each lock, its token, expiry, queue and last transitions',
    usage: async () => (await import('./plugin/usage.ts')).STATUS_USAGE,
    run: async (argv) => (await import('./plugin/status.ts')).runStatus(argv),
  },
  history: {
    summary: "a lock's grants, holders and tokens over time, as far as the cluster keeps them",
    usage: async () => (await import('./plugin/usage.ts')).HISTORY_USAGE,
    run: async (argv) => (await import('./plugin/history.ts')).runHistory(argv),
  },
  explain: {
    summary: 'why nobody holds a lock, or why a given pod is not its holder',
    usage: async () => (await import('./plugin/usage.ts')).EXPLAIN_USAGE,
    run: async (argv) => (await import('./plugin/explain-command.ts')).runExplain(argv),
  },
  handover: {
    summary: 'move a lock to a chosen pod: the holder drains, releases, the pod is granted',
    usage: async () => (await import('./plugin/usage.ts')).HANDOVER_USAGE,
    run: async (argv) => (await import('./plugin/handover.ts')).runHandover(argv),
  },
  release: {
    summary: "end the holder's grant now (--force; only fencing guards stop the released holder)",
    usage: async () => (await import('./plugin/usage.ts')).RELEASE_USAGE,
    run: async (argv) => (await import('./plugin/release.ts')).runRelease(argv),
  },
};

run('kubectl fencepost', PLUGIN_COMMANDS);
