// hack/sbom.ts, the image's CycloneDX SBOM: against the repository's real package-lock.json (so a
// new dependency is covered the day it is added), a status.d folder and a Bun metafile written
// here, and once as the command the Dockerfile runs (plain `node`, type stripping).
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generateSbom, parseSbomFlags, type SbomFlags } from '../../../hack/sbom.ts';
import {
  bundledLockPaths,
  licensesOf,
  parseDpkgStatus,
  purlEncode,
  type LockEntry,
  type PackageLock,
} from '../../../hack/sbom/cyclonedx.ts';

const ROOT = resolve(import.meta.dirname, '../../..');
const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as PackageLock & {
  packages: Record<string, LockEntry & { os?: string[]; cpu?: string[] }>;
};
const work = mkdtempSync(join(tmpdir(), 'fencepost-sbom-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Two of the distroless status.d files (abridged `dpkg-query -s`), one with an epoch. */
const STATUS_D = {
  'base-files':
    'Package: base-files\nStatus: install ok installed\nEssential: yes\nArchitecture: amd64\n' +
    'Version: 12.4+deb12u11\nDescription: Debian base system miscellaneous files\n This package contains\n .\n more.\n',
  zlib1g:
    'Package: zlib1g\nArchitecture: amd64\nMulti-Arch: same\nSource: zlib\nVersion: 1:1.2.13.dfsg-1\n' +
    'Maintainer: Mark Brown <broonie@debian.org>\nDescription: compression library - runtime\n',
  'zlib1g.md5sums': 'd41d8cd98f00b204e9800998ecf8427e  usr/lib/x86_64-linux-gnu/libz.so.1\n',
};
const statusDir = join(work, 'status.d');
mkdirSync(statusDir);
for (const [name, text] of Object.entries(STATUS_D)) writeFileSync(join(statusDir, name), text);

/** The shape of Bun's metafile: paths relative to where it ran, node_modules possibly symlinked. */
const agentMeta = join(work, 'fencepost-agent.meta.json');
writeFileSync(
  agentMeta,
  JSON.stringify({
    inputs: {
      'src/cli/agent-main.ts': {},
      'node_modules/pino/pino.js': {},
      'node_modules/pino/lib/proto.js': {},
      '../../main/node_modules/js-yaml/dist/js-yaml.mjs': {},
      'node_modules/thread-stream/package.json': {},
    },
  }),
);

const ARGS = [
  ...['--lockfile', 'package-lock.json', '--dpkg-status', statusDir, '--node-version', '24.21.0'],
  ...['--agent-meta', agentMeta, '--version', '0.1.0', '--revision', '87486dd2e30f26de362b9336a7dcefffab03845d'],
  ...['--created', '2026-01-01T00:00:00Z', '--out', join(work, 'sbom.cdx.json')],
];
/** without drops a flag and its value from ARGS; replacing gives the flag another value. */
function without(flag: string): string[] {
  const at = ARGS.indexOf(flag);
  return [...ARGS.slice(0, at), ...ARGS.slice(at + 2)];
}
function replacing(flag: string, value: string): string[] {
  return ARGS.map((arg, i) => (ARGS[i - 1] === flag ? value : arg));
}
const flags: SbomFlags = parseSbomFlags(ARGS);
const bom = generateSbom(flags, ROOT);
const purls = bom.components.map((c) => c.purl);
const dependsOn = (ref: string): readonly string[] => bom.dependencies.find((d) => d.ref === ref)?.dependsOn ?? [];

/** npmPurlOf is written out here rather than taken from the code under test. */
function npmPurlOf(path: string, entry: LockEntry): string {
  const name = entry.name ?? path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
  return `pkg:npm/${name.replace(/^@/, '%40')}@${entry.version ?? ''}`;
}
const production = Object.entries(lock.packages).filter(([path, e]) => path !== '' && e.dev !== true && !e.link);

describe('the SBOM of the image (hack/sbom.ts)', () => {
  it('is a CycloneDX 1.6 document about the fencepost image at the given version and revision', () => {
    expect(bom.bomFormat).toBe('CycloneDX');
    expect(bom.specVersion).toBe('1.6');
    expect(bom.metadata.timestamp).toBe('2026-01-01T00:00:00Z');
    expect(bom.metadata.component).toMatchObject({ type: 'container', name: 'fencepost', version: '0.1.0' });
    expect(bom.metadata.component.properties).toEqual([
      { name: 'org.opencontainers.image.revision', value: '87486dd2e30f26de362b9336a7dcefffab03845d' },
    ]);
  });

  it('lists every production package of package-lock.json, with its license and SHA-512', () => {
    expect(production.length).toBeGreaterThan(50);
    expect(purls).toEqual(expect.arrayContaining(production.map(([path, e]) => npmPurlOf(path, e))));
    const clientNode = bom.components.find((c) => c.purl.startsWith('pkg:npm/%40kubernetes/client-node@'));
    expect(clientNode).toMatchObject({ group: '@kubernetes', name: 'client-node', type: 'library' });
    expect(clientNode?.licenses).toEqual([{ license: { id: 'Apache-2.0' } }]);
    const integrity = lock.packages['node_modules/@kubernetes/client-node']?.integrity ?? '';
    expect(clientNode?.hashes).toEqual([
      { alg: 'SHA-512', content: Buffer.from(integrity.slice('sha512-'.length), 'base64').toString('hex') },
    ]);
  });

  it('leaves out what only development needs', () => {
    for (const dev of ['typescript', 'vitest', 'eslint', 'prettier', 'bun', '%40oven/bun-linux-x64']) {
      expect(purls.filter((p) => p.startsWith(`pkg:npm/${dev}@`))).toEqual([]);
    }
    const npmCount = purls.filter((p) => p.startsWith('pkg:npm/')).length;
    expect(npmCount).toBe(new Set(production.map(([path, e]) => npmPurlOf(path, e))).size);
  });

  it('has one component per purl, sorted, and a dependency graph that only names components', () => {
    expect(new Set(purls).size).toBe(purls.length);
    expect(bom.components.every((c) => c['bom-ref'] === c.purl)).toBe(true);
    expect(purls).toEqual(purls.toSorted((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    const refs = new Set([...purls, bom.metadata.component['bom-ref']]);
    expect(bom.dependencies.flatMap((d) => [d.ref, ...d.dependsOn]).filter((r) => !refs.has(r))).toEqual([]);
  });

  it('says the image holds Node, the agent, the Debian packages and package.json dependencies', () => {
    const direct = Object.keys(lock.packages['']?.dependencies ?? {}).map((name) =>
      npmPurlOf(`node_modules/${name}`, lock.packages[`node_modules/${name}`] ?? {}),
    );
    expect(dependsOn('fencepost')).toEqual(
      expect.arrayContaining([
        'pkg:generic/node@24.21.0',
        'pkg:generic/fencepost-agent@0.1.0',
        'pkg:deb/debian/zlib1g@1%3A1.2.13.dfsg-1?arch=amd64&distro=debian-12',
        ...direct,
      ]),
    );
    expect(dependsOn('pkg:npm/%40kubernetes/client-node@2.0.1')).toContain(
      npmPurlOf('node_modules/js-yaml', lock.packages['node_modules/js-yaml'] ?? {}),
    );
  });

  it('lists the packages Bun bundled into the agent, and the Bun runtime, as the agent’s dependencies', () => {
    const bun = lock.packages['node_modules/bun']?.version ?? '';
    expect(purls).toContain(`pkg:generic/bun@${bun}`);
    expect(dependsOn('pkg:generic/fencepost-agent@0.1.0')).toEqual(
      [
        `pkg:generic/bun@${bun}`,
        ...['js-yaml', 'pino', 'thread-stream'].map((name) =>
          npmPurlOf(`node_modules/${name}`, lock.packages[`node_modules/${name}`] ?? {}),
        ),
      ].toSorted(),
    );
  });

  it('maps bundled modules to lockfile paths, nested and scoped ones too, and refuses unknown ones', () => {
    const nested: PackageLock = {
      lockfileVersion: 3,
      packages: { 'node_modules/a': { version: '1.0.0' }, 'node_modules/a/node_modules/@s/b': { version: '2.0.0' } },
    };
    expect(bundledLockPaths(nested, ['x/node_modules/a/node_modules/@s/b/lib/c.js', 'node_modules/a/i.js'])).toEqual([
      'node_modules/a',
      'node_modules/a/node_modules/@s/b',
    ]);
    expect(() => bundledLockPaths(nested, ['node_modules/gone/index.js'])).toThrow(/no entry "node_modules\/gone"/);
  });

  it('turns the status.d files into Debian purls, the epoch percent-encoded, md5sums files skipped', () => {
    expect(purls.filter((p) => p.startsWith('pkg:deb/'))).toEqual([
      'pkg:deb/debian/base-files@12.4+deb12u11?arch=amd64&distro=debian-12',
      'pkg:deb/debian/zlib1g@1%3A1.2.13.dfsg-1?arch=amd64&distro=debian-12',
    ]);
    expect(bom.components.find((c) => c.name === 'zlib1g')?.version).toBe('1:1.2.13.dfsg-1');
  });

  it('reads a whole dpkg status file, skipping packages that are not installed', () => {
    const status =
      'Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9+deb12u10\n\n' +
      'Package: old\nStatus: deinstall ok config-files\nArchitecture: amd64\nVersion: 1.0\n\n\n';
    expect(parseDpkgStatus(status, 'status')).toEqual([
      { name: 'libc6', version: '2.36-9+deb12u10', architecture: 'amd64' },
    ]);
    expect(() => parseDpkgStatus('Package: x\nVersion: 1\n', 'status.d/x')).toThrow(/status\.d\/x/);
  });

  it.each([
    { license: 'MIT', want: [{ license: { id: 'MIT' } }] },
    { license: '(MIT OR Apache-2.0)', want: [{ expression: '(MIT OR Apache-2.0)' }] },
    { license: 'SEE LICENSE IN LICENSE.md', want: [{ license: { name: 'SEE LICENSE IN LICENSE.md' } }] },
  ])('writes the license "$license" as CycloneDX allows', ({ license, want }) => {
    expect(licensesOf(license)).toEqual(want);
  });

  it('percent-encodes what a purl segment cannot hold as is', () => {
    expect(purlEncode('1:2.3+dfsg~1')).toBe('1%3A2.3+dfsg~1');
    expect(purlEncode('@scope')).toBe('%40scope');
  });

  it('gives the same bytes for the same inputs and --created', () => {
    expect(JSON.stringify(generateSbom(flags, ROOT))).toBe(JSON.stringify(bom));
  });

  // An optional package for another platform is in the lockfile but not in the image; the SBOM
  // cannot tell (it does not know the image's os/cpu), so none may be a production entry.
  it('finds no platform-specific production entry in package-lock.json', () => {
    expect(production.filter(([, e]) => e.os !== undefined || e.cpu !== undefined).map(([p]) => p)).toEqual([]);
  });
});

describe('hack/sbom.ts input errors', () => {
  it.each([
    { name: 'a missing flag', argv: without('--lockfile'), error: /missing --lockfile/ },
    { name: 'an unknown flag', argv: [...ARGS, '--frobnicate', 'x'], error: /--frobnicate/ },
    {
      name: 'a Node version with a v',
      argv: replacing('--node-version', 'v24.21.0'),
      error: /--node-version "v24.21.0"/,
    },
    { name: 'a version that is not semver', argv: replacing('--version', 'latest'), error: /--version "latest"/ },
    { name: 'a revision that is no SHA', argv: replacing('--revision', 'HEAD'), error: /--revision "HEAD"/ },
    { name: 'a date without a zone', argv: replacing('--created', '2026-01-01 00:00'), error: /--created "2026-01-01/ },
    { name: 'a distro not Debian', argv: [...ARGS, '--distro', 'alpine-3'], error: /--distro "alpine-3"/ },
  ])('rejects $name, naming the flag', ({ argv, error }) => {
    expect(() => parseSbomFlags(argv)).toThrow(error);
  });

  const emptyDir = join(work, 'empty');
  mkdirSync(emptyDir);
  it.each([
    { flag: '--lockfile', value: 'no-such-lock.json', error: /--lockfile no-such-lock\.json: ENOENT/ },
    { flag: '--lockfile', value: 'package.json', error: /--lockfile package\.json: not a package-lock/ },
    { flag: '--dpkg-status', value: emptyDir, error: /--dpkg-status .*empty: no installed package/ },
    { flag: '--agent-meta', value: 'package.json', error: /--agent-meta package\.json: not a Bun metafile/ },
  ])('rejects $flag $value, naming the flag and the path', ({ flag, value, error }) => {
    expect(() => generateSbom(parseSbomFlags(replacing(flag, value)), ROOT)).toThrow(error);
  });
});

describe('node hack/sbom.ts, as the Dockerfile runs it', () => {
  const run = (argv: readonly string[]) =>
    spawnSync(process.execPath, ['hack/sbom.ts', ...argv], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });

  it('writes the SBOM to --out and says what it holds', () => {
    const r = run(ARGS);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/ \d+ npm, 2 deb, node, bun, fencepost-agent \(bundles 3 npm packages\)/);
    expect(readFileSync(flags.out, 'utf8')).toBe(`${JSON.stringify(bom, null, 2)}\n`);
  });

  it('exits 2 with the flag named on stderr', () => {
    const r = run(without('--out'));
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^sbom: missing --out/);
  });

  // The Docker build context holds hack/sbom.ts and hack/sbom/, never src/ or test/.
  it('imports nothing but node: modules and its own core', () => {
    for (const file of ['hack/sbom.ts', 'hack/sbom/cyclonedx.ts']) {
      const from = [...readFileSync(join(ROOT, file), 'utf8').matchAll(/^(?:import|export)[^;]*?from '([^']+)'/gms)];
      expect(from.map((m) => m[1]).filter((s) => !s?.startsWith('node:') && s !== './sbom/cyclonedx.ts')).toEqual([]);
    }
  });
});
