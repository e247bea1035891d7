/** `kubectl fencepost status`: read (read.ts), compute (status-view.ts), print. */
import { parsePluginArgs } from '../../config/plugin.ts';
import { connect, listLocks, readLock, snapshot, snapshots } from './read.ts';
import { statusDetail, statusTable, statusView } from './status-view.ts';
import { STATUS } from './usage.ts';

/** runStatus runs one `status` command line; resolves with the exit code. */
export async function runStatus(argv: readonly string[]): Promise<number> {
  const o = parsePluginArgs(STATUS, argv);
  const c = connect(o);
  if (o.lock !== undefined) {
    const s = await snapshot(c, await readLock(c, c.namespace, o.lock));
    const now = Date.now();
    const v = statusView(s, now);
    process.stdout.write(o.output === 'json' ? `${JSON.stringify(v, null, 2)}\n` : statusDetail(v, now));
    return 0;
  }
  const namespace = o.allNamespaces ? undefined : c.namespace;
  const all = await snapshots(c, await listLocks(c, namespace));
  const now = Date.now();
  const views = all.map((s) => statusView(s, now));
  if (o.output === 'json') process.stdout.write(`${JSON.stringify({ items: views }, null, 2)}\n`);
  else if (views.length === 0)
    // kubectl's words for an empty list, on stderr as kubectl prints them.
    process.stderr.write(
      o.allNamespaces ? 'No resources found\n' : `No resources found in ${c.namespace} namespace.\n`,
    );
  else process.stdout.write(statusTable(views, now, o.allNamespaces));
  return 0;
}
