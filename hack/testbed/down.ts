/** down.ts — `npm run testbed:down`: stops the testbed that `npm run testbed:up` started. */
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { teardownNode } from '../../test/support/node/node.ts';
import { reapStale } from '../../test/support/testbed/processes.ts';
import { readState, TESTBED_DIR } from './state.ts';

const state = readState();
if (state === undefined) {
  process.stderr.write('No testbed running\n');
} else {
  process.kill(state.pid, 'SIGTERM');
  const deadline = performance.now() + 30_000;
  while (readState() !== undefined && performance.now() < deadline) await sleep(100);
  process.stderr.write(`Testbed stopped (pid ${state.pid})\n`);
}
// Anything the server process left behind (it was killed, say) is reaped by PID.
const reaped = reapStale(join(TESTBED_DIR, 'pids'));
if (reaped > 0) process.stderr.write(`Reaped ${reaped} leftover process(es)\n`);
// And a real node's host changes (bridge, iptables, sysctls, cgroups, mounts), from its ledger.
const problems = await teardownNode(join(TESTBED_DIR, 'node'));
if (problems.length > 0) {
  process.stderr.write(`Could not undo: ${problems.join('; ')}\n`);
  process.exitCode = 1;
}
