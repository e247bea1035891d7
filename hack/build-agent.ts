/**
 * build-agent.ts — `node hack/build-agent.ts [--force]` (`npm run build:agent`): compiles the
 * in-pod agent (src/cli/agent-main.ts: `agent`, `exec`, `version`) with Bun into one executable,
 * dist/bin/fencepost-agent, and writes Bun's metafile beside it (every module in the bundle).
 *
 * `node hack/build-agent.ts --kubectl-plugin [--force] [--krew-uri-base URL]` compiles the kubectl
 * plugin (src/cli/kubectl-fencepost.ts) the same way into dist/bin/kubectl-fencepost, so that
 * `kubectl fencepost` needs no Node on the user's machine, and packs it for krew: a .tar.gz with
 * the executable and the LICENSE, and the krew manifest naming its URL and SHA-256, in dist/krew/.
 * Bun compiles for the platform it runs on, so the manifest lists that one platform.
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
  copyFileSync,
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
import { gzipSync } from 'node:zlib';
import { filesKey, filesUnder } from './files-key.ts';

const ROOT = resolve(import.meta.dirname, '..');
/**
 * LEAN_FLAGS make the agent smaller in memory, measured by bench/agent-footprint.ts
 * (docs/benchmarks.md, "Agent footprint"): `--bytecode` stores the compiled bytecode in the
 * executable, so it is read from the file (pages shared by every agent of the node running the
 * same file) instead of parsed and compiled into each process's own heap; `--smol` is Bun's
 * small-heap mode (collects more often); a JIT tier-up threshold scaled by 10^9 keeps the agent in
 * the interpreter and baseline tiers: it runs a renew every few seconds, which optimised machine
 * code does not speed up, and each tier's code is memory of each process. The executable then
 * turns the JIT off altogether when it starts (src/cli/interpreter-only.ts: no build option can);
 * the threshold still holds for a user who turns it back on with BUN_JSC_useJIT=1.
 */
const LEAN_FLAGS = ['--bytecode', '--compile-exec-argv=--smol', '--compile-jit-policy=1000000000'] as const;

/** AGENT_BINARY is where the compiled agent is written. */
export const AGENT_BINARY = join(ROOT, 'dist/bin/fencepost-agent');
/** AGENT_METAFILE is Bun's metafile of that build: `inputs` names every bundled module. */
export const AGENT_METAFILE = `${AGENT_BINARY}.meta.json`;
/** PLUGIN_BINARY is where the compiled kubectl plugin is written. */
export const PLUGIN_BINARY = join(ROOT, 'dist/bin/kubectl-fencepost');
/** KREW_DIR holds the plugin's krew archive and manifest. */
export const KREW_DIR = join(ROOT, 'dist/krew');

/** A Bun-compiled executable: its entry module and where it goes (its metafile and stamp beside it). */
interface Target {
  readonly entry: string;
  readonly binary: string;
}
const AGENT: Target = { entry: 'src/cli/agent-main.ts', binary: AGENT_BINARY };
const PLUGIN: Target = { entry: 'src/cli/kubectl-fencepost.ts', binary: PLUGIN_BINARY };

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
  return compile(AGENT, options.force === true);
}

/** buildKubectlPlugin compiles dist/bin/kubectl-fencepost unless it is up to date (or `force`). */
export function buildKubectlPlugin(options: { readonly force?: boolean } = {}): AgentBuild {
  return compile(PLUGIN, options.force === true);
}

function compile(target: Target, force: boolean): AgentBuild {
  const bun = pinnedBun();
  const metafile = `${target.binary}.meta.json`;
  const stampFile = `${target.binary}.inputs-sha256`;
  const stamp = inputsHash(bun.version);
  const fresh =
    !force &&
    existsSync(target.binary) &&
    existsSync(metafile) &&
    existsSync(stampFile) &&
    readFileSync(stampFile, 'utf8') === stamp;
  if (!fresh) {
    mkdirSync(join(ROOT, 'dist/bin'), { recursive: true });
    // Built beside the target and renamed over it, so a test run never starts a half-written file.
    // In a folder of its own under the final name: Bun embeds the output's file name in the
    // executable, and a per-process name would make every build's bytes (and the image) differ.
    const tmpDir = mkdtempSync(join(ROOT, 'dist/bin/.build-'));
    const tmp = join(tmpDir, basename(target.binary));
    try {
      compileEntry(target.entry, tmp, { metafile, lean: true });
      renameSync(tmp, target.binary);
    } finally {
      rmSync(tmpDir, { recursive: true, force: true });
    }
    writeFileSync(stampFile, stamp);
  }
  return { path: target.binary, metafile, built: !fresh, inputs: bundledModules(metafile) };
}

/** KrewPackage: the plugin's archive for this platform and the krew manifest that names it. */
export interface KrewPackage {
  readonly archive: string;
  readonly manifest: string;
  readonly sha256: string;
}

/** KREW_URI_BASE is where a release's assets are downloaded from (the archive's name is appended). */
export const KREW_URI_BASE = 'https://github.com/fencepost/fencepost/releases/download/v{version}/';

/**
 * packKrew compiles the plugin (unless up to date) and writes dist/krew/: the archive
 * kubectl-fencepost_<version>_<os>_<arch>.tar.gz (the executable and LICENSE at its root) and
 * fencepost.yaml, the krew manifest (krew.googlecontainertools.github.com/v1alpha2 Plugin) with
 * the archive's URL under `uriBase` and its SHA-256.
 */
export function packKrew(options: { readonly force?: boolean; readonly uriBase?: string } = {}): KrewPackage {
  const plugin = buildKubectlPlugin(options);
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  const os = process.platform === 'win32' ? 'windows' : process.platform;
  const arch = process.arch === 'x64' ? 'amd64' : process.arch;
  mkdirSync(KREW_DIR, { recursive: true });
  const name = `kubectl-fencepost_${version}_${os}_${arch}.tar.gz`;
  const archive = join(KREW_DIR, name);
  const stage = mkdtempSync(join(KREW_DIR, '.stage-'));
  try {
    copyFileSync(plugin.path, join(stage, 'kubectl-fencepost'));
    copyFileSync(join(ROOT, 'LICENSE'), join(stage, 'LICENSE'));
    // Fixed owner, mode order and time: the same executable gives the same archive and checksum.
    execFileSync(
      'tar',
      [
        '--sort=name',
        '--owner=0',
        '--group=0',
        '--numeric-owner',
        '--mtime=@0',
        '-cf',
        join(stage, 'a.tar'),
        '-C',
        stage,
        'kubectl-fencepost',
        'LICENSE',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    writeFileSync(archive, gzipSync(readFileSync(join(stage, 'a.tar')), { level: 9 }));
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
  const sha256 = createHash('sha256').update(readFileSync(archive)).digest('hex');
  const uri = (options.uriBase ?? KREW_URI_BASE).replaceAll('{version}', version) + name;
  const manifest = join(KREW_DIR, 'fencepost.yaml');
  writeFileSync(
    manifest,
    [
      'apiVersion: krew.googlecontainertools.github.com/v1alpha2',
      'kind: Plugin',
      'metadata:',
      '  name: fencepost',
      'spec:',
      `  version: v${version}`,
      '  homepage: https://github.com/fencepost/fencepost',
      '  shortDescription: Inspect and hand over fencepost locks and fencing tokens',
      '  description: |',
      '    Shows who holds each fencepost DistributedLock, its fencing token, expiry and queue',
      "    (status), a lock's grants over time (history) and why nobody or another pod holds it",
      '    (explain); moves a lock to a chosen pod (handover) or ends a grant (release --force).',
      '    One executable compiled with Bun: no Node needed.',
      '  platforms:',
      '    - selector:',
      '        matchLabels:',
      `          os: ${os}`,
      `          arch: ${arch}`,
      `      uri: ${uri}`,
      `      sha256: ${sha256}`,
      '      bin: kubectl-fencepost',
      '      files:',
      '        - from: kubectl-fencepost',
      '          to: .',
      '        - from: LICENSE',
      '          to: .',
      '',
    ].join('\n'),
  );
  return { archive, manifest, sha256 };
}

/**
 * compileAgent compiles the agent into outfile with the pinned Bun: for this machine, or for
 * `target` (a Bun target such as bun-linux-arm64: Bun fetches that platform's runtime from the npm
 * registry and cross-compiles, nothing runs under emulation). A cross-compiled agent is built
 * without LEAN_FLAGS: they were measured on this machine's build only.
 */
export function compileAgent(outfile: string, o: { readonly target?: string; readonly metafile?: string } = {}): void {
  compileEntry(AGENT.entry, outfile, { ...o, lean: o.target === undefined });
}

/**
 * compileLean compiles any entry module (an absolute path) into outfile exactly as the agent is
 * compiled, LEAN_FLAGS included: bench/agent-footprint.ts builds its floor programs with it, so
 * that they differ from the agent in their code only.
 */
export function compileLean(entry: string, outfile: string): void {
  compileEntry(entry, outfile, { lean: true });
}

/** bundledBuiltins lists the Node built-in modules (`fs`, `http` …) the bundle of a metafile imports. */
export function bundledBuiltins(metafile = AGENT_METAFILE): string[] {
  const meta = JSON.parse(readFileSync(metafile, 'utf8')) as {
    inputs?: Record<string, { imports?: readonly { path: string; external?: boolean }[] }>;
  };
  const names = new Set<string>();
  for (const input of Object.values(meta.inputs ?? {}))
    for (const i of input.imports ?? []) if (i.external === true) names.add(i.path.replace(/^node:/, ''));
  return [...names].toSorted();
}

/** compileEntry compiles `entry` into outfile with the pinned Bun (see compileAgent for `target`). */
function compileEntry(
  entry: string,
  outfile: string,
  o: { readonly target?: string; readonly metafile?: string; readonly lean: boolean },
): void {
  execFileSync(
    pinnedBun().path,
    [
      'build',
      '--compile',
      '--no-compile-autoload-dotenv',
      '--no-compile-autoload-bunfig',
      ...(o.lean ? LEAN_FLAGS : []),
      ...(o.target !== undefined ? [`--target=${o.target}`] : []),
      ...(o.metafile !== undefined ? [`--metafile=${o.metafile}`] : []),
      entry,
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
  return filesKey(ROOT, [...filesUnder(ROOT, 'src'), 'package-lock.json'], {
    bun: bunVersion,
    flags: LEAN_FLAGS.join(' '),
  });
}

if (import.meta.main) {
  const started = performance.now();
  const force = process.argv.includes('--force');
  if (process.argv.includes('--kubectl-plugin')) {
    const at = process.argv.indexOf('--krew-uri-base');
    const uriBase = at > 0 ? process.argv[at + 1] : undefined;
    const k = packKrew({ force, ...(uriBase !== undefined ? { uriBase } : {}) });
    process.stdout.write(`${relative(ROOT, k.archive)} sha256 ${k.sha256}\n${relative(ROOT, k.manifest)}\n`);
    process.exit(0);
  }
  const b = buildAgent({ force });
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
