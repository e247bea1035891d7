/**
 * The exit codes and the --help text of `fencepost exec` (src/cli/exec.ts), in a module of their
 * own so that `fencepost exec --help` and src/cli/main.ts load no Kubernetes client.
 */

/** EXIT_NOT_ACQUIRED: the lock was not granted within --wait. */
export const EXIT_NOT_ACQUIRED = 3;
/** EXIT_LOST: the lock was lost while the command ran; the command was stopped. */
export const EXIT_LOST = 4;
/** EXIT_ALREADY_DONE: --run-id was already reported completed; the command did not run. */
export const EXIT_ALREADY_DONE = 5;

/** EXEC_USAGE is printed by --help. */
export const EXEC_USAGE = `Usage: fencepost exec --lock NAME [--wait D] [--run-id ID] [--grace D] [--kubeconfig PATH] -- CMD [ARGS...]

Identity (downward API, required): POD_NAME, POD_NAMESPACE, POD_UID

  --lock NAME        the DistributedLock to hold while CMD runs
  --wait D           give up if not granted within D (default: wait forever); exit ${EXIT_NOT_ACQUIRED}
  --run-id ID        run once per ID (Mutex locks): if a holder already completed ID, exit ${EXIT_ALREADY_DONE}
                     without running; when CMD exits 0, report ID completed
  --grace D          on loss, SIGKILL CMD's process group this long after SIGTERM (default: half of
                     lease − renew deadline, and never longer than lease − renew deadline)
  --kubeconfig PATH  (default: in-cluster, $KUBECONFIG, ~/.kube/config)
  --log-level LEVEL  debug, info, warn or error (default error); silent turns logging off

CMD runs with FENCEPOST_LOCK and FENCEPOST_TOKEN set, in a process group of its own. exec signals the whole
group: on loss, when exec gets SIGTERM, SIGINT, SIGHUP or SIGQUIT, and when CMD exits leaving processes
behind. A process that leaves the group (setsid) is not reached. Exit status: CMD's, ${EXIT_NOT_ACQUIRED} when not acquired,
${EXIT_LOST} when the lock was lost while CMD ran, ${EXIT_ALREADY_DONE} when --run-id was already completed.
`;
