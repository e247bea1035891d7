/**
 * sbom.ts — writes a CycloneDX 1.6 JSON SBOM of the fencepost image:
 *
 *   node hack/sbom.ts --lockfile package-lock.json --dpkg-status DIR --node-version 24.21.0 \
 *     --agent-meta dist/bin/fencepost-agent.meta.json --version 0.1.0 \
 *     [--revision GITSHA] [--created 2026-01-01T00:00:00Z] [--distro debian-12] --out sbom.cdx.json
 *
 * It lists the production npm packages (package-lock.json), the Debian packages of the base image
 * (--dpkg-status: a distroless status.d folder of one file per package, or a dpkg status file),
 * Node, and the agent executable with the Bun runtime and npm packages compiled into it (Bun's
 * metafile). --distro defaults to `debian-<major>` from base-files' version. Paths are relative
 * to the working directory. With --created fixed the output is byte-identical for the same inputs.
 *
 * It runs in a Docker build stage with plain `node` (Node ≥ 22.18 type stripping), so it needs
 * only itself, hack/sbom/cyclonedx.ts and `node:` modules; hence no imports from src/.
 */
import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  buildBom,
  debianDistro,
  parseDpkgStatus,
  type Bom,
  type DebPackage,
  type LockEntry,
  type PackageLock,
} from './sbom/cyclonedx.ts';

/** SbomFlags are the command line, validated; paths as given. */
export interface SbomFlags {
  readonly lockfile: string;
  readonly dpkgStatus: string;
  readonly nodeVersion: string;
  readonly agentMeta: string;
  readonly version: string;
  readonly revision?: string;
  readonly created?: string;
  readonly distro?: string;
  readonly out: string;
}

const USAGE =
  'usage: node hack/sbom.ts --lockfile FILE --dpkg-status DIR|FILE --node-version X.Y.Z --agent-meta FILE ' +
  '--version X.Y.Z [--revision GITSHA] [--created RFC3339] [--distro debian-N] --out FILE';

const SEMVER = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/;
// A commit, `-dirty` when built from uncommitted changes (hack/build-image.sh), or the Dockerfile's
// default `unknown` (a plain `docker build` without --build-arg REVISION).
const GIT_SHA = /^(?:[0-9a-f]{7,64}(?:-dirty)?|unknown)$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$/;
const DISTRO = /^debian-\d+$/;

/** parseSbomFlags validates the command line; every error names the flag and the value. */
export function parseSbomFlags(argv: readonly string[]): SbomFlags {
  const str = { type: 'string' } as const;
  let values: Partial<Record<string, string | boolean>>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        lockfile: str,
        'dpkg-status': str,
        'node-version': str,
        'agent-meta': str,
        version: str,
        revision: str,
        created: str,
        distro: str,
        out: str,
      },
    }));
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${USAGE}`, { cause: err });
  }
  const required = (flag: string): string => {
    const value = values[flag];
    if (typeof value !== 'string' || value === '') throw new Error(`missing --${flag}\n${USAGE}`);
    return value;
  };
  const optional = (flag: string): string | undefined => {
    const value = values[flag];
    return typeof value === 'string' ? value : undefined;
  };
  const matching = (flag: string, value: string, shape: RegExp, what: string): string => {
    if (!shape.test(value)) throw new Error(`--${flag} "${value}" is not ${what}`);
    return value;
  };

  const revision = optional('revision');
  const created = optional('created');
  const distro = optional('distro');
  if (created !== undefined && (!RFC3339.test(created) || Number.isNaN(Date.parse(created)))) {
    throw new Error(`--created "${created}" is not an RFC 3339 date-time like 2026-01-01T00:00:00Z`);
  }
  return {
    lockfile: required('lockfile'),
    dpkgStatus: required('dpkg-status'),
    nodeVersion: matching('node-version', required('node-version'), SEMVER, 'a version like 24.21.0'),
    agentMeta: required('agent-meta'),
    version: matching('version', required('version'), SEMVER, 'a version like 0.1.0'),
    ...(revision === undefined
      ? {}
      : { revision: matching('revision', revision, GIT_SHA, 'a lower-case git SHA (optionally -dirty) or unknown') }),
    ...(created === undefined ? {} : { created }),
    ...(distro === undefined ? {} : { distro: matching('distro', distro, DISTRO, 'like debian-12') }),
    out: required('out'),
  };
}

/**
 * generateSbom reads the files the flags name (relative to `cwd`) and builds the BOM. `now` is the
 * timestamp when --created is not given. Errors name the flag and the path of the bad input.
 */
export function generateSbom(flags: SbomFlags, cwd: string, now: Date = new Date()): Bom {
  const lock = about('--lockfile', flags.lockfile, () => readLockfile(resolve(cwd, flags.lockfile)));
  const debs = about('--dpkg-status', flags.dpkgStatus, () => readDpkgStatus(resolve(cwd, flags.dpkgStatus)));
  const agentInputs = about('--agent-meta', flags.agentMeta, () => readMetafileInputs(resolve(cwd, flags.agentMeta)));
  const distro =
    flags.distro ??
    about('--dpkg-status', flags.dpkgStatus, () => {
      const derived = debianDistro(debs);
      if (derived === undefined) throw new Error('no base-files package to tell the Debian release: pass --distro');
      return derived;
    });
  return about('--lockfile', flags.lockfile, () =>
    buildBom({
      lock,
      debs,
      distro,
      nodeVersion: flags.nodeVersion,
      agentInputs,
      version: flags.version,
      ...(flags.revision === undefined ? {} : { revision: flags.revision }),
      created: flags.created ?? now.toISOString(),
    }),
  );
}

/** about runs read and prefixes its error with the flag and value that led to it. */
function about<T>(flag: string, value: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw new Error(`${flag} ${value}: ${(err as Error).message}`, { cause: err });
  }
}

function readJson(path: string): unknown {
  const text = readFileSync(path, 'utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new Error(`not JSON (${(err as Error).message})`, { cause: err });
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function readLockfile(path: string): PackageLock {
  const lock = readJson(path);
  if (!isRecord(lock) || (lock['lockfileVersion'] !== 2 && lock['lockfileVersion'] !== 3)) {
    throw new Error('not a package-lock.json with lockfileVersion 2 or 3');
  }
  const packages = lock['packages'];
  if (!isRecord(packages) || !Object.values(packages).every(isRecord)) {
    throw new Error('has no `packages` map of objects');
  }
  // The fields read are checked where they are used: strings by construction of npm's lockfile.
  return { lockfileVersion: lock['lockfileVersion'], packages: packages as Record<string, LockEntry> };
}

/**
 * readDpkgStatus parses a status.d folder (one file per package; the `*.md5sums` files newer
 * distroless images keep beside them are skipped) or a single dpkg status file. Throws when it
 * finds no installed package: an empty list would be a wrong SBOM, not an empty image.
 */
function readDpkgStatus(path: string): DebPackage[] {
  const files = statSync(path).isDirectory()
    ? readdirSync(path, { withFileTypes: true })
        .filter((e) => e.isFile() && !e.name.startsWith('.') && !e.name.endsWith('.md5sums'))
        .map((e) => join(path, e.name))
        .toSorted()
    : [path];
  const debs = files.flatMap((file) => parseDpkgStatus(readFileSync(file, 'utf8'), file));
  if (debs.length === 0) throw new Error('no installed package found');
  return debs;
}

function readMetafileInputs(path: string): string[] {
  const meta = readJson(path);
  if (!isRecord(meta) || !isRecord(meta['inputs'])) throw new Error('not a Bun metafile (no `inputs` object)');
  return Object.keys(meta['inputs']);
}

/** writeSbom writes the BOM as 2-space JSON with a final newline. */
export function writeSbom(bom: Bom, path: string): void {
  writeFileSync(path, `${JSON.stringify(bom, null, 2)}\n`);
}

if (import.meta.main) {
  try {
    const flags = parseSbomFlags(process.argv.slice(2));
    const bom = generateSbom(flags, process.cwd());
    about('--out', flags.out, () => writeSbom(bom, resolve(flags.out)));
    const count = (prefix: string): number => bom.components.filter((c) => c.purl.startsWith(prefix)).length;
    const agent = bom.dependencies.find((d) => d.ref.startsWith('pkg:generic/fencepost-agent@'));
    process.stdout.write(
      `${flags.out}: ${bom.components.length} components: ${count('pkg:npm/')} npm, ${count('pkg:deb/')} deb, ` +
        `node, bun, fencepost-agent (bundles ${agent?.dependsOn.filter((r) => r.startsWith('pkg:npm/')).length ?? 0} npm packages)\n`,
    );
  } catch (err) {
    process.stderr.write(`sbom: ${(err as Error).message}\n`);
    process.exit(2);
  }
}
