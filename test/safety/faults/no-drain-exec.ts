/**
 * no-drain-exec.ts — CALIBRATION ONLY: `fencepost exec` deaf to planned handovers, as it was before
 * it stopped its job on `draining`: the job is stopped only when the handover's release ends the
 * term (SIGTERM, the grace, SIGKILL, as on a loss), and the session does not hold a short drain
 * for it — so the successor is granted while the old job still writes. The `exec-handover` trials
 * must count tree writes after the successor's grant. Used only by `--calibrate no-drain` runs.
 *
 *   node test/safety/faults/no-drain-exec.ts --lock NAME ... -- CMD [ARGS...]   (exec's flags)
 */
import { runExec } from '../../../src/cli/exec.ts';
import { spawnGroup } from '../../../src/cli/process-group.ts';

process.exitCode = await runExec(process.argv.slice(2), spawnGroup, { ignoreHandover: true });
