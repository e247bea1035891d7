/**
 * The exit codes and the --help text of `fencepost exec` (src/cli/exec.ts), in a module of their
 * own so that `fencepost exec --help` and src/cli/main.ts load no Kubernetes client.
 */

/** EXIT_NOT_ACQUIRED: the lock was not granted within --wait (or held, with --if-held fail). */
export const EXIT_NOT_ACQUIRED = 3;
/** EXIT_LOST: the lock was lost while the command ran; the command was stopped. */
export const EXIT_LOST = 4;
/** EXIT_ALREADY_DONE: --run-id was already reported completed; the command did not run. */
export const EXIT_ALREADY_DONE = 5;

/** EXIT_SKIPPED: --if-held skip, and another pod held a lock; the command did not run, nothing was left queued. */
export const EXIT_SKIPPED = 6;

/** EXEC_USAGE is printed by --help. */
export const EXEC_USAGE = `Usage: fencepost exec --lock NAME [--lock NAME...] [--wait D] [--if-held wait|skip|fail] [--run-id ID]
                      [--grace D] [--kubeconfig PATH] -- CMD [ARGS...]
       fencepost exec --store URL [--namespace NS] [--ttl D] --lock NAME [--lock NAME...] [--wait D]
                      [--if-held wait|skip|fail] [--grace D] -- CMD [ARGS...]

Identity (downward API, required without --store): POD_NAME, POD_NAMESPACE, POD_UID

  --lock NAME        the DistributedLock to hold while CMD runs; repeat it to hold several at once: all
                     of them or none, taken in one global order (namespace, then name) so that execs
                     asking for overlapping sets cannot deadlock, released in reverse order
  --wait D           give up if not granted within D (default: wait forever); with several --lock, D
                     bounds the whole set; exit ${EXIT_NOT_ACQUIRED}
  --if-held P        when another pod holds a lock (its Lease names another holder, or grants it to
                     another pod while exec waits): wait (default) asks and waits, bounded by --wait;
                     skip exits ${EXIT_SKIPPED} at once, fail exits ${EXIT_NOT_ACQUIRED} at once — CMD does not run, and a
                     request exec made is withdrawn first (locks already taken are released)
  --run-id ID        run once per ID (Mutex locks, one --lock only): if a holder already completed ID,
                     exit ${EXIT_ALREADY_DONE} without running; when CMD exits 0, report ID completed
  --grace D          on loss or a planned handover, SIGKILL CMD's process group this long after SIGTERM
                     (default: half of lease − renew deadline, and never longer than lease − renew
                     deadline; with several locks, of the shortest; in a handover also at the latest
                     0.5 s before the drain ends)
  --kubeconfig PATH  (default: in-cluster, $KUBECONFIG, ~/.kube/config)
  --store URL        hold the locks in Redis instead of on Kubernetes Leases, for apps outside a cluster
                     (no pod identity, no kubeconfig, no controller): redis://[[user]:pass@]host[:port][/db]
                     (rediss:// for TLS), redis+sentinel://h1:p1,h2:p2/MASTER, redis+cluster://h1:p1,h2:p2,
                     or redlock://h1:p1,h2:p2,h3:p3,... (a majority of N independent masters, 5 usual).
                     Not with --run-id or --kubeconfig. Node only: the compiled fencepost-agent has no
                     Redis client. See docs/stores.md
  --namespace NS     with --store: the lock's namespace in the store's keys (default: default)
  --ttl D            with --store: the lock's TTL, renewed every third of it (300ms to 24h, default 15s)
  --log-level LEVEL  debug, info, warn or error (default error); silent turns logging off

CMD runs in a process group of its own with FENCEPOST_LOCKS (the locks, space-separated, in the order
taken) and FENCEPOST_TOKEN_<LOCK> for each lock (the name upper-cased, other characters than A-Z and 0-9
as _: db-migrate -> FENCEPOST_TOKEN_DB_MIGRATE; two --lock that map to one variable are refused); with
one lock also FENCEPOST_LOCK and FENCEPOST_TOKEN (with several these are unset). A Semaphore lock adds
FENCEPOST_PERMIT_<LOCK>, its permit number (one lock: also FENCEPOST_PERMIT). Losing any lock stops
CMD. So does a planned handover of any lock (kubectl fencepost handover), when it starts: exec stops the
group and only then releases, so the successor is granted after CMD is gone (a drain period shorter than
the grace + 0.5 s is held that long). exec signals the whole group: on loss or handover, when exec gets SIGTERM, SIGINT, SIGHUP or SIGQUIT, and when
CMD exits leaving processes behind. A process that leaves the group (setsid) is not reached. Exit
status: CMD's, ${EXIT_NOT_ACQUIRED} when not acquired, ${EXIT_LOST} when a lock was lost or handed over while CMD ran, ${EXIT_ALREADY_DONE} when --run-id was
already completed, ${EXIT_SKIPPED} when skipped (--if-held skip).
`;
