/**
 * demo.ts — `npm run demo`: what a fencing token is for, shown on real servers in well under a
 * minute. A kube-apiserver, etcd and redis-server on loopback, the fencepost controller, two
 * pods (worker-a, worker-b) each with a fencepost agent and a worker process that writes to a
 * Redis "ledger" while its agent says it holds the lock `billing`. The holder is frozen
 * (SIGSTOP) between checking its lock and writing, for twice the lease: the lock moves on to the
 * other pod with a larger token, and when the frozen worker wakes up its stale write is refused
 * by the Redis guard. Then the same pause again without the guard: the stale write overwrites
 * the newer holder's.
 *
 *   node hack/demo.ts          narrate, print a summary, tear everything down
 *   node hack/demo.ts --json   the narration goes to stderr and the summary to stdout as JSON
 *   node hack/demo.ts --keep   leave the testbed running afterwards (until Ctrl-C)
 *   node hack/demo.ts --web    the same testbed, driven from a web page instead (hack/race/,
 *                              docs/race.md): race, freeze the holder, toggle the guard; until Ctrl-C
 *
 * Binaries: KUBEBUILDER_ASSETS or the hack/testbed/build.sh cache, built on first use.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { findBinary } from '../test/support/testbed/assets.ts';
import { Demo, type Cleanups } from './demo/story.ts';
import { formatSummary } from './demo/summary.ts';
import { timeline } from './demo/timeline.ts';
import { DEFAULT_PAUSE_SECONDS, DEFAULT_RACE_ADDRESS, raceOptions, type RaceOptions } from './race/options.ts';
import { startRacePage } from './race/web.ts';

const startedAt = performance.now();
const root = resolve(import.meta.dirname, '..');

const USAGE = `Usage: node hack/demo.ts [--json] [--keep]
       node hack/demo.ts --web [--address HOST:PORT] [--pause SECONDS] [--allow-remote]

  --json           print the summary as JSON on stdout (the narration goes to stderr)
  --keep           leave the testbed running afterwards, until Ctrl-C
  --web            serve the race page on the testbed instead of narrating (docs/race.md), until Ctrl-C
  --address H:P    where the page listens (default ${DEFAULT_RACE_ADDRESS}; port 0: a free one)
  --pause SECONDS  the freeze the page proposes (default ${DEFAULT_PAUSE_SECONDS}; 1-120)
  --allow-remote   permit a non-loopback --address (whoever reaches it can freeze processes here)
`;

let flags: { json: boolean; keep: boolean; web: RaceOptions | undefined };
try {
  const { values } = parseArgs({
    strict: true,
    options: {
      json: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      web: { type: 'boolean', default: false },
      address: { type: 'string', default: DEFAULT_RACE_ADDRESS },
      pause: { type: 'string', default: String(DEFAULT_PAUSE_SECONDS) },
      'allow-remote': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  if (values.web && values.json) throw new Error('--json: not with --web (the page is the output)');
  const web = values.web
    ? raceOptions({ address: values.address, pause: values.pause, allowRemote: values['allow-remote'] })
    : undefined;
  flags = { json: values.json, keep: values.keep, web };
} catch (err) {
  process.stderr.write(`demo: ${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
  process.exit(2);
}

const out = flags.json ? process.stderr : process.stdout;
const tl = timeline(out, out.isTTY && (process.env['NO_COLOR'] ?? '') === '', startedAt);

// Everything started is stopped by PID, in reverse order, on success, failure and Ctrl-C alike.
const dir = mkdtempSync(join(tmpdir(), 'fencepost-demo-'));
let keepDir = false;
const stack: { name: string; stop: () => Promise<void> | void }[] = [];
const cleanups: Cleanups = {
  add(name, stop) {
    stack.push({ name, stop });
  },
};
let tearingDown: Promise<void> | undefined;
const teardown = (): Promise<void> => {
  tearingDown ??= (async () => {
    for (let c = stack.pop(); c !== undefined; c = stack.pop()) {
      try {
        await c.stop();
      } catch (err) {
        process.stderr.write(
          `demo: failed to stop the ${c.name}: ${err instanceof Error ? err.message : String(err)}\n`,
        );
      }
    }
    if (keepDir) process.stderr.write(`demo: logs kept in ${dir}\n`);
    else rmSync(dir, { recursive: true, force: true });
  })();
  return tearingDown;
};
let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (interrupted) return;
    interrupted = true;
    tl.step(`${sig}: stopping everything the demo started`);
    void teardown().then(() => {
      process.exit(flags.keep || flags.web !== undefined ? 0 : 130);
    });
  });
}

/** assetsDir finds the testbed binaries, building them with hack/testbed/build.sh when missing. */
function assetsDir(): string {
  try {
    return dirname(findBinary('kube-apiserver'));
  } catch {
    tl.step(
      'Building the test control plane with hack/testbed/build.sh (first run only; kube-apiserver takes 10-25 minutes on 2 cores)',
    );
    const printed = execFileSync(join(root, 'hack/testbed/build.sh'), ['kube-apiserver', 'etcd', 'kubectl'], {
      stdio: ['ignore', 'pipe', 'inherit'],
      encoding: 'utf8',
    });
    const assets = printed.trim().split('\n').pop() ?? '';
    process.env['KUBEBUILDER_ASSETS'] = assets;
    return dirname(findBinary('kube-apiserver'));
  }
}

function kubectlDir(): string | undefined {
  try {
    return dirname(findBinary('kubectl'));
  } catch {
    return undefined;
  }
}

const demo = new Demo(tl, dir, cleanups);
try {
  if (flags.web !== undefined) {
    tl.heading('fencepost demo --web: the race page, on real servers and processes');
    await demo.setup(assetsDir());
    const page = await startRacePage(demo, cleanups, flags.web);
    tl.step(`Race page: ${tl.paint.bold(page.url)} (Ctrl-C stops the page and the testbed)`);
    setInterval(() => undefined, 1 << 30); // until Ctrl-C
  } else {
    tl.heading('fencepost demo: a lock holder freezes, wakes up, and writes with a stale fencing token');
    await demo.setup(assetsDir());
    await demo.act(true);
    await demo.act(false);
    const summary = demo.summary();
    if (flags.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
    else tl.plain(formatSummary(summary, tl.paint));
    if (flags.keep && !interrupted) {
      tl.plain(demo.keepInstructions(kubectlDir()));
      setInterval(() => undefined, 1 << 30); // until Ctrl-C
    } else {
      tl.step('Stopping the workers, agents, controller, redis-server and control plane');
      await teardown();
      tl.step('Done');
      process.exit(0); // do not wait for the stopped servers' grace timers
    }
  }
} catch (err) {
  if (!interrupted) {
    process.stderr.write(`\ndemo failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    keepDir = true;
    await teardown();
    process.exit(1);
  }
}
