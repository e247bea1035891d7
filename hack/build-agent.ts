/**
 * build-agent.ts — `node hack/build-agent.ts [--force]` (`npm run build:agent`): compiles the
 * in-pod agent (src/cli/agent-main.ts: `agent`, `exec`, `version`) with Bun into one executable,
 * dist/bin/fencepost-agent, and writes Bun's metafile beside it (every module in the bundle).
 *
 * Why Bun: bench/agent-footprint.ts measured the same agent code on Node 24 and compiled by Bun
 * (docs/benchmarks.md, "Agent footprint"); the compiled agent needs a fraction of the memory and
 * starts faster, and it is one file to copy into an app image for `fencepost-agent exec`. The
 * controller stays on Node.
 *
 * The build is skipped when the executable is newer work than its inputs: a SHA-256 over every
 * file under src/, package-lock.json and the Bun version is kept beside it, so the test run's
 * global setup can call it every time (about 2 s when it does build). `.env` and `bunfig.toml`
 * autoloading are off: a sidecar must not change behaviour with the files in its working folder.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
/** AGENT_BINARY is where the compiled agent is written. */
export const AGENT_BINARY = join(ROOT, 'dist/bin/fencepost-agent');
/** AGENT_METAFILE is Bun's metafile of that build: `inputs` names every bundled module. */
export const AGENT_METAFILE = `${AGENT_BINARY}.meta.json`;
const STAMP = `${AGENT_BINARY}.inputs-sha256`;
const ENTRY = 'src/cli/agent-main.ts';

/**
 * bunPath is the Bun the project pins (devDependency `bun`), never one from PATH. The `bun`
 * package's postinstall links the platform package's binary into node_modules/.bin; when install
 * scripts did not run (`npm ci --ignore-scripts`), the platform package still holds it.
 */
export function bunPath(): string {
  return pinnedBun().path;
}

/** The Bun found (path and `--version`), looked for once per process: each probe spawns it. */
let found: { readonly path: string; readonly version: string } | undefined;

function pinnedBun(): { readonly path: string; readonly version: string } {
  if (found !== undefined) return found;
  const linked = join(ROOT, 'node_modules/.bin/bun');
  const oven = join(ROOT, 'node_modules/@oven');
  const platform = existsSync(oven) ? readdirSync(oven).map((d) => join(oven, d, 'bin/bun')) : [];
  for (const bun of [linked, ...platform]) {
    try {
      const version = execFileSync(bun, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
      found = { path: bun, version };
      return found;
    } catch {
      /* a placeholder or another platform's binary: try the next */
    }
  }
  throw new Error(
    `no working Bun in ${linked} or ${oven}: run npm ci (Bun comes from the npm registry as a devDependency)`,
  );
}

/** AgentBuild says what {@link buildAgent} did. */
export interface AgentBuild {
  readonly path: string;
  readonly metafile: string;
  /** built: false when the executable was already up to date. */
  readonly built: boolean;
  /** inputs: the bundled modules, paths relative to the repository. */
  readonly inputs: readonly string[];
}

/** buildAgent compiles dist/bin/fencepost-agent unless it is up to date (or `force`). */
export function buildAgent(options: { readonly force?: boolean } = {}): AgentBuild {
  const bun = pinnedBun();
  const stamp = inputsHash(bun.version);
  const fresh =
    options.force !== true &&
    existsSync(AGENT_BINARY) &&
    existsSync(AGENT_METAFILE) &&
    existsSync(STAMP) &&
    readFileSync(STAMP, 'utf8') === stamp;
  if (!fresh) {
    mkdirSync(join(ROOT, 'dist/bin'), { recursive: true });
    // Built beside the target and renamed over it, so a test run never starts a half-written file.
    // In a folder of its own under the final name: Bun embeds the output's file name in the
    // executable, and a per-process name would make every build's bytes (and the image) differ.
    const tmpDir = mkdtempSync(join(ROOT, 'dist/bin/.build-'));
    const tmp = join(tmpDir, basename(AGENT_BINARY));
    try {
      compileAgent(tmp, { metafile: AGENT_METAFILE });
      renameSync(tmp, AGENT_BINARY);
    } finally {
      rmSync(tmpDir, { recursive: true, force: true });
    }
    writeFileSync(STAMP, stamp);
  }
  return { path: AGENT_BINARY, metafile: AGENT_METAFILE, built: !fresh, inputs: bundledModules() };
}

/**
 * compileAgent compiles the agent into outfile with the pinned Bun: for this machine, or for
 * `target` (a Bun target such as bun-linux-arm64: Bun fetches that platform's runtime from the npm
 * registry and cross-compiles, nothing runs under emulation).
 */
export function compileAgent(outfile: string, o: { readonly target?: string; readonly metafile?: string } = {}): void {
  execFileSync(
    pinnedBun().path,
    [
      'build',
      '--compile',
      '--no-compile-autoload-dotenv',
      '--no-compile-autoload-bunfig',
      ...(o.target !== undefined ? [`--target=${o.target}`] : []),
      ...(o.metafile !== undefined ? [`--metafile=${o.metafile}`] : []),
      ENTRY,
      '--outfile',
      outfile,
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
}

/** bundledModules lists the metafile's inputs, relative to the repository. */
export function bundledModules(metafile = AGENT_METAFILE): string[] {
  const meta = JSON.parse(readFileSync(metafile, 'utf8')) as { inputs?: Record<string, unknown> };
  return Object.keys(meta.inputs ?? {}).map((p) => (p.startsWith('/') ? relative(ROOT, p) : p));
}

function inputsHash(bunVersion: string): string {
  const h = createHash('sha256');
  h.update(bunVersion);
  for (const file of [...filesUnder(join(ROOT, 'src')), join(ROOT, 'package-lock.json')]) {
    h.update(relative(ROOT, file));
    h.update('\0');
    h.update(readFileSync(file));
    h.update('\0');
  }
  return h.digest('hex');
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name))
    .toSorted();
}

if (import.meta.main) {
  const started = performance.now();
  const b = buildAgent({ force: process.argv.includes('--force') });
  const packages = new Set(b.inputs.filter((p) => p.includes('node_modules/')).map(packageOf));
  process.stdout.write(
    `${relative(ROOT, b.path)}: ${b.built ? 'built' : 'up to date'} in ${((performance.now() - started) / 1000).toFixed(1)} s; ` +
      `${b.inputs.length} modules bundled, packages: ${[...packages].toSorted().join(', ') || 'none'}\n`,
  );
}

/** packageOf names the npm package a bundled node_modules path belongs to. */
export function packageOf(path: string): string {
  const rest = path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length).split('/');
  return rest[0]?.startsWith('@') === true ? `${rest[0]}/${rest[1] ?? ''}` : (rest[0] ?? path);
}
