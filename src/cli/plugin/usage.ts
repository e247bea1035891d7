/**
 * What each `kubectl fencepost` command accepts and its --help text. Imports nothing heavy, so
 * that --help loads no Kubernetes client (src/cli/dispatch.ts loads a command's code only when it
 * runs).
 */
import type { PluginCommandSpec } from '../../config/plugin.ts';

/** COMMON_FLAGS: the flags every command takes, kubectl's spellings. */
const COMMON_FLAGS = `  --kubeconfig PATH             kubeconfig (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)
  --context NAME                kubeconfig context (default: the current context)
  -n, --namespace NS            the lock's namespace (default: the context's namespace, else default)
  -o, --output FORMAT           table (default) or json
`;

/** STATUS: `kubectl fencepost status [LOCK] [-n NS | -A]`. */
export const STATUS: PluginCommandSpec = { name: 'status', lock: 'optional', flags: ['all-namespaces'] };

/** STATUS_USAGE is printed by `kubectl fencepost status --help`. */
export const STATUS_USAGE = `Usage: kubectl fencepost status [LOCK] [-n NS | -A] [flags]

Who holds each DistributedLock, with which fencing token, when the holder's lease runs out
(the Lease's renewTime + leaseDurationSeconds, by this machine's clock), the Mutex queue, and the
last transitions (from the lock's Events). Without LOCK: one row per lock; with LOCK: that lock
in full.

${COMMON_FLAGS}  -A, --all-namespaces          every namespace's locks (not with LOCK)
`;

/** HISTORY: `kubectl fencepost history LOCK`. */
export const HISTORY: PluginCommandSpec = { name: 'history', lock: 'required', flags: [] };

/** HISTORY_USAGE is printed by `kubectl fencepost history --help`. */
export const HISTORY_USAGE = `Usage: kubectl fencepost history LOCK [-n NS] [flags]

The lock's grants and handoffs with their holders and fencing tokens, oldest first, as far as the
cluster still has them: the controller's Events (kept for the API server's --event-ttl, 1 h by
default), the Lease's current or last grant, and status.completedRuns (Mutex). The output ends
with what is and is not retained.

${COMMON_FLAGS}`;

/** EXPLAIN: `kubectl fencepost explain LOCK [--pod POD]`. */
export const EXPLAIN: PluginCommandSpec = { name: 'explain', lock: 'required', flags: ['pod', 'controller-lease'] };

/** EXPLAIN_USAGE is printed by `kubectl fencepost explain --help`. */
export const EXPLAIN_USAGE = `Usage: kubectl fencepost explain LOCK [--pod POD] [-n NS] [flags]

Why the lock is held by whom it is held, or why nobody holds it: no pod matches the selector,
candidates not Ready, a Mutex lock nobody asked for, lock delay after an expiry, the fencing
backend unavailable, the controller not running or not leading, … The reasons come from the
controller's own decision function, run on what the cluster shows now. With --pod: why that pod
is not the holder (not selected, not Ready, no Mutex request, its place in line).

${COMMON_FLAGS}  --pod POD                     explain why this pod is (not) the holder
  --controller-lease [NS/]NAME  the controller's leader-election Lease (default: fencepost-controller, in any namespace)
`;

/** HANDOVER: `kubectl fencepost handover LOCK --to POD`. */
export const HANDOVER: PluginCommandSpec = { name: 'handover', lock: 'required', flags: ['to', 'drain', 'wait'] };

/** HANDOVER_USAGE is printed by `kubectl fencepost handover --help`. */
export const HANDOVER_USAGE = `Usage: kubectl fencepost handover LOCK --to POD [--drain D] [--wait[=D]] [-n NS] [flags]

Moves the lock to POD without waiting for expiry (a planned handover): annotates the lock with the
target and the token of the current grant (fencepost.io/handover); the controller checks that POD
is a Ready candidate (Mutex: that it asked for the lock) and marks the holder's Lease; the holder's
agent tells the app (draining), waits for it to drain, stops believing and releases; the controller
grants POD with a larger token. A request made against an earlier token is refused, so it never
moves a later grant. The answer is in the annotation fencepost.io/handover-result and in Events.

${COMMON_FLAGS}  --to POD                      the pod to hand the lock to (required)
  --drain D                     how long the holder's app may drain, e.g. 20s (default: the lock's spec.handover.drainSeconds, 30s)
  --wait[=D]                    wait for the controller's answer, up to D (default 2m); exit 1 unless it completed
`;

/** RELEASE: `kubectl fencepost release LOCK --force`. */
export const RELEASE: PluginCommandSpec = { name: 'release', lock: 'required', flags: ['force', 'yes', 'wait'] };

/** RELEASE_USAGE is printed by `kubectl fencepost release --help`. */
export const RELEASE_USAGE = `Usage: kubectl fencepost release LOCK --force [--yes] [--wait[=D]] [-n NS] [flags]

Ends the current holder's grant now and lets the controller grant the next candidate with a larger
token (annotation fencepost.io/force-release on the lock, naming the current token; the controller
records a ForceReleased Event naming who asked). Asks for confirmation unless --yes.

WARNING: the released holder is not stopped. It may still be running and believe it holds the
lock until its agent sees the release; only fencing guards (resources that check the token)
refuse its writes. Prefer kubectl fencepost handover, which lets the holder stop first.

${COMMON_FLAGS}  --force                       required: this command only forces releases
  -y, --yes                     do not ask for confirmation
  --wait[=D]                    wait for the controller's answer, up to D (default 2m)
`;
