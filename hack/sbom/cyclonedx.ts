/**
 * cyclonedx.ts — the pure core of hack/sbom.ts: from the parsed inputs (package-lock.json, dpkg
 * status paragraphs, Bun's metafile of the agent) to a CycloneDX 1.6 BOM of the fencepost image.
 * No file or process access here; hack/sbom.ts reads the files and names the flag when one is bad.
 *
 * It runs inside a Docker build stage with plain `node` (type stripping), so it imports only
 * `node:` modules and uses only erasable TypeScript; the build context holds no src/ or test/.
 *
 * The output is deterministic for the same inputs and `created`: components sorted by purl
 * (code-unit order, not locale), every object built with a fixed key order, no serialNumber (a
 * random one would make two builds of the same image differ; CycloneDX makes it optional).
 */
import { Buffer } from 'node:buffer';

/** LockEntry is the part of a package-lock.json `packages` entry the SBOM reads. */
export interface LockEntry {
  readonly name?: string;
  readonly version?: string;
  readonly resolved?: string;
  readonly integrity?: string;
  readonly license?: string;
  readonly dev?: boolean;
  readonly devOptional?: boolean;
  readonly link?: boolean;
  readonly dependencies?: Readonly<Record<string, string>>;
  readonly optionalDependencies?: Readonly<Record<string, string>>;
  readonly peerDependencies?: Readonly<Record<string, string>>;
}

/** PackageLock is a lockfileVersion 2 or 3 package-lock.json: `packages` keyed by install path. */
export interface PackageLock {
  readonly lockfileVersion: number;
  readonly packages: Readonly<Record<string, LockEntry>>;
}

/** DebPackage is one installed Debian package from a dpkg status paragraph. */
export interface DebPackage {
  readonly name: string;
  readonly version: string;
  readonly architecture: string;
}

/** SbomInput is everything {@link buildBom} needs, already read and parsed. */
export interface SbomInput {
  readonly lock: PackageLock;
  readonly debs: readonly DebPackage[];
  /** distro is the purl `distro` qualifier of the Debian packages, e.g. `debian-12`. */
  readonly distro: string;
  readonly nodeVersion: string;
  /** agentInputs are the keys of `inputs` in Bun's metafile of dist/bin/fencepost-agent. */
  readonly agentInputs: readonly string[];
  /** version is fencepost's (the image's, the agent's and this tool's). */
  readonly version: string;
  readonly revision?: string;
  /** created is the BOM's metadata.timestamp, an RFC 3339 date-time. */
  readonly created: string;
}

type ComponentType = 'application' | 'container' | 'library';

interface Hash {
  readonly alg: string;
  readonly content: string;
}

type Licenses = readonly [{ readonly expression: string }] | readonly { readonly license: LicenseRef }[];
type LicenseRef = { readonly id: string } | { readonly name: string };

interface Property {
  readonly name: string;
  readonly value: string;
}

/** Component is a CycloneDX component as this tool writes it; bom-ref is the purl. */
export interface Component {
  readonly type: ComponentType;
  readonly 'bom-ref': string;
  readonly group?: string;
  readonly name: string;
  readonly version: string;
  readonly licenses?: Licenses;
  readonly hashes?: readonly Hash[];
  readonly purl: string;
}

/** Dependency is one node of the CycloneDX dependency graph. */
export interface Dependency {
  readonly ref: string;
  readonly dependsOn: readonly string[];
}

/** Bom is the CycloneDX 1.6 document. */
export interface Bom {
  readonly $schema: string;
  readonly bomFormat: 'CycloneDX';
  readonly specVersion: '1.6';
  readonly version: 1;
  readonly metadata: {
    readonly timestamp: string;
    readonly lifecycles: readonly [{ readonly phase: 'build' }];
    readonly tools: { readonly components: readonly Omit<Component, 'bom-ref' | 'purl'>[] };
    readonly component: {
      readonly type: 'container';
      readonly 'bom-ref': string;
      readonly name: string;
      readonly version: string;
      readonly properties?: readonly Property[];
    };
  };
  readonly components: readonly Component[];
  readonly dependencies: readonly Dependency[];
}

/** IMAGE_REF is the bom-ref of the image (metadata.component); every other ref is a purl. */
export const IMAGE_REF = 'fencepost';
const AGENT_NAME = 'fencepost-agent';

/**
 * buildBom assembles the BOM: the production npm packages (the image's node_modules), the Debian
 * packages, Node, the agent executable and the Bun runtime compiled into it.
 *
 * The dependency graph: the image depends on Node, the agent, the Debian packages and the npm
 * packages package.json's `dependencies` name; each npm package on the packages its lockfile
 * entry requires (resolved the way Node resolves them); the agent on Bun and the npm packages
 * it bundles. Node, Bun and the Debian packages have no entry of their own: their dependencies
 * are not known here, and CycloneDX reads a missing entry as "unknown", an empty one as "none".
 *
 * Throws when the lockfile lacks the `bun` entry or a package the agent bundles.
 */
export function buildBom(input: SbomInput): Bom {
  const npm = npmComponents(input.lock, bundledLockPaths(input.lock, input.agentInputs));
  const bun = bunVersion(input.lock);
  const node = application('node', input.nodeVersion, `pkg:generic/node@${purlEncode(input.nodeVersion)}`);
  const bunRuntime = application('bun', bun, `pkg:generic/bun@${purlEncode(bun)}`);
  const agent = application(AGENT_NAME, input.version, `pkg:generic/${AGENT_NAME}@${purlEncode(input.version)}`);
  const debs = uniqueBy(
    input.debs.map((d) => debComponent(d, input.distro)),
    (c) => c.purl,
  );

  const components = [...npm.components, ...debs, node, bunRuntime, agent].toSorted((a, b) =>
    byCodeUnits(a.purl, b.purl),
  );
  const image: Dependency = {
    ref: IMAGE_REF,
    dependsOn: sortedUnique([node.purl, agent.purl, ...debs.map((d) => d.purl), ...npm.direct]),
  };
  const agentDeps: Dependency = { ref: agent.purl, dependsOn: sortedUnique([bunRuntime.purl, ...npm.bundled]) };
  const dependencies = [image, agentDeps, ...npm.graph].toSorted((a, b) =>
    a.ref === IMAGE_REF ? -1 : b.ref === IMAGE_REF ? 1 : byCodeUnits(a.ref, b.ref),
  );

  return {
    $schema: 'http://cyclonedx.org/schema/bom-1.6.schema.json',
    bomFormat: 'CycloneDX',
    specVersion: '1.6',
    version: 1,
    metadata: {
      timestamp: input.created,
      lifecycles: [{ phase: 'build' }],
      tools: { components: [{ type: 'application', group: 'fencepost', name: 'sbom.ts', version: input.version }] },
      component: {
        type: 'container',
        'bom-ref': IMAGE_REF,
        name: 'fencepost',
        version: input.version,
        ...(input.revision === undefined
          ? {}
          : { properties: [{ name: 'org.opencontainers.image.revision', value: input.revision }] }),
      },
    },
    components,
    dependencies,
  };
}

/** NpmPart is what {@link npmComponents} derives from the lockfile. */
interface NpmPart {
  readonly components: readonly Component[];
  /** direct: purls of the packages the root's `dependencies`/`optionalDependencies` name. */
  readonly direct: readonly string[];
  /** bundled: purls of the packages Bun compiled into the agent. */
  readonly bundled: readonly string[];
  readonly graph: readonly Dependency[];
}

/**
 * npmComponents lists one component per purl for every lockfile entry that `npm ci --omit=dev`
 * installs, plus any entry the agent bundles (even a dev-only one: it is in the executable).
 *
 * Installed means neither `dev` nor a link; `devOptional` entries are kept, because npm omits
 * them only when both dev and optional dependencies are omitted (arborist Node.shouldOmit).
 * Caveat: an optional package for another os/cpu would be listed though npm skips it; the unit
 * test checks that the lockfile has no such production entry.
 */
export function npmComponents(lock: PackageLock, bundledPaths: readonly string[]): NpmPart {
  const installed = Object.keys(lock.packages).filter((path) => {
    const entry = lock.packages[path];
    return path !== '' && entry !== undefined && entry.link !== true && entry.dev !== true;
  });
  const paths = sortedUnique([...installed, ...bundledPaths]);
  const purlOf = new Map(paths.map((path) => [path, npmPurl(packageName(lock, path), entryOf(lock, path).version)]));

  const components = new Map<string, Component>();
  const edges = new Map<string, Set<string>>();
  for (const path of paths) {
    const entry = entryOf(lock, path);
    const purl = purlOf.get(path) ?? '';
    if (!components.has(purl)) components.set(purl, npmComponent(packageName(lock, path), entry, purl));
    const targets = edges.get(purl) ?? new Set<string>();
    edges.set(purl, targets);
    for (const name of requiredNames(entry)) {
      // Unresolved (an optional or peer dependency npm did not install) or not installed: no edge.
      const target = resolvePackage(lock, path, name);
      const targetPurl = target === undefined ? undefined : purlOf.get(target);
      if (targetPurl !== undefined && targetPurl !== purl) targets.add(targetPurl);
    }
  }

  const root = lock.packages[''] ?? {};
  const direct = [...Object.keys(root.dependencies ?? {}), ...Object.keys(root.optionalDependencies ?? {})]
    .map((name) => resolvePackage(lock, '', name))
    .flatMap((path) => (path === undefined ? [] : [purlOf.get(path) ?? '']))
    .filter((purl) => purl !== '');
  return {
    components: [...components.values()],
    direct,
    bundled: bundledPaths.map((path) => purlOf.get(path) ?? ''),
    graph: [...edges].map(([ref, targets]) => ({ ref, dependsOn: [...targets].toSorted(byCodeUnits) })),
  };
}

function npmComponent(fullName: string, entry: LockEntry, purl: string): Component {
  const slash = fullName.indexOf('/');
  const scoped = fullName.startsWith('@') && slash > 0;
  const licenses = entry.license === undefined ? undefined : licensesOf(entry.license);
  const hashes = entry.integrity === undefined ? [] : integrityHashes(entry.integrity);
  return {
    type: 'library',
    'bom-ref': purl,
    ...(scoped ? { group: fullName.slice(0, slash) } : {}),
    name: scoped ? fullName.slice(slash + 1) : fullName,
    version: entry.version ?? '',
    ...(licenses === undefined ? {} : { licenses }),
    ...(hashes.length === 0 ? {} : { hashes }),
    purl,
  };
}

/**
 * packageName is the npm name of the package installed at a lockfile path: the entry's `name`
 * when it has one (an alias, `"foo": "npm:bar@1"`, installs bar at node_modules/foo), else the
 * path after its last `node_modules/`.
 */
export function packageName(lock: PackageLock, path: string): string {
  const named = lock.packages[path]?.name;
  if (named !== undefined) return named;
  const at = path.lastIndexOf('node_modules/');
  return at < 0 ? path.slice(path.lastIndexOf('/') + 1) : path.slice(at + 'node_modules/'.length);
}

function entryOf(lock: PackageLock, path: string): LockEntry & { readonly version: string } {
  const entry = lock.packages[path];
  if (entry?.version === undefined) throw new Error(`package-lock entry "${path}" has no version`);
  return { ...entry, version: entry.version };
}

function requiredNames(entry: LockEntry): string[] {
  return [
    ...Object.keys(entry.dependencies ?? {}),
    ...Object.keys(entry.optionalDependencies ?? {}),
    ...Object.keys(entry.peerDependencies ?? {}),
  ];
}

/**
 * resolvePackage finds the lockfile path a `require(name)` from the package at `from` loads:
 * from/node_modules/name, then each enclosing node_modules up to the root's (Node's algorithm,
 * which npm's layout follows). A link entry resolves to its target. Undefined when not installed.
 */
export function resolvePackage(lock: PackageLock, from: string, name: string): string | undefined {
  let base = from;
  for (;;) {
    const candidate = base === '' ? `node_modules/${name}` : `${base}/node_modules/${name}`;
    const entry = lock.packages[candidate];
    if (entry !== undefined) return entry.link === true ? entry.resolved : candidate;
    if (base === '') return undefined;
    const cut = base.lastIndexOf('/node_modules/');
    base = cut < 0 ? '' : base.slice(0, cut);
  }
}

/**
 * bundledLockPaths maps the metafile's bundled modules to the lockfile paths of their packages:
 * `../x/node_modules/a/node_modules/@s/b/lib/c.js` → `node_modules/a/node_modules/@s/b`. Bun
 * writes the paths relative to where it ran (through a symlinked node_modules too), so only the
 * part from the first `node_modules/` on is meaningful. Throws for a package not in the lockfile.
 */
export function bundledLockPaths(lock: PackageLock, inputs: readonly string[]): string[] {
  const paths = new Set<string>();
  for (const input of inputs) {
    const path = lockPathOf(input);
    if (path === undefined) continue;
    if (lock.packages[path] === undefined) {
      throw new Error(`the agent bundles ${input}, but package-lock.json has no entry "${path}"`);
    }
    paths.add(path);
  }
  return [...paths].toSorted(byCodeUnits);
}

function lockPathOf(input: string): string | undefined {
  const start = /(?:^|\/)node_modules\//.exec(input);
  if (start === null) return undefined;
  const parts = input.slice(start.index + start[0].length - 'node_modules/'.length).split('/');
  const key: string[] = [];
  let i = 0;
  while (parts[i] === 'node_modules' && i + 2 < parts.length) {
    const width = parts[i + 1]?.startsWith('@') === true ? 3 : 2;
    key.push(...parts.slice(i, i + width));
    i += width;
  }
  return key.length === 0 ? undefined : key.join('/');
}

/** bunVersion is the version of the `bun` package, whose runtime `bun build --compile` embeds. */
function bunVersion(lock: PackageLock): string {
  const version = lock.packages['node_modules/bun']?.version;
  if (version === undefined) {
    throw new Error('package-lock.json has no "node_modules/bun" entry: the Bun compiled into the agent is unknown');
  }
  return version;
}

function application(name: string, version: string, purl: string): Component {
  return { type: 'application', 'bom-ref': purl, name, version, purl };
}

function debComponent(deb: DebPackage, distro: string): Component {
  const purl =
    `pkg:deb/debian/${purlEncode(deb.name)}@${purlEncode(deb.version)}` +
    `?arch=${purlEncode(deb.architecture)}&distro=${purlEncode(distro)}`;
  return { type: 'library', 'bom-ref': purl, name: deb.name, version: deb.version, purl };
}

/** npmPurl is `pkg:npm/name@version`, a scope's `@` percent-encoded as the purl spec requires. */
export function npmPurl(name: string, version: string): string {
  return `pkg:npm/${name.split('/').map(purlEncode).join('/')}@${purlEncode(version)}`;
}

/**
 * purlEncode percent-encodes one purl segment: everything but letters, digits and `.-_~+`
 * (so a Debian epoch's `:` becomes %3A and a scope's `@` %40, as Syft and packageurl-go write them).
 */
export function purlEncode(segment: string): string {
  return [...new TextEncoder().encode(segment)]
    .map((byte) => {
      const c = String.fromCharCode(byte);
      return /[A-Za-z0-9.\-_~+]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    })
    .join('');
}

/**
 * licensesOf turns a package.json `license` into CycloneDX licenses: a compound SPDX expression
 * (`MIT OR Apache-2.0`) as an expression, a single identifier as an id, anything else (`SEE
 * LICENSE IN …`, `UNLICENSED`) as a name. Caveat: a single token that is not an SPDX identifier
 * would still be written as an id; without the SPDX list (no dependencies) it cannot be told.
 */
export function licensesOf(license: string): Licenses {
  const text = license.trim();
  if (/[()]|\s(?:AND|OR|WITH)\s/.test(text)) return [{ expression: text }];
  if (/^[A-Za-z0-9.+-]+$/.test(text) && text !== 'UNLICENSED') return [{ license: { id: text } }];
  return [{ license: { name: text } }];
}

const HASH_ALGORITHMS: Readonly<Record<string, { readonly alg: string; readonly bytes: number }>> = {
  sha1: { alg: 'SHA-1', bytes: 20 },
  sha256: { alg: 'SHA-256', bytes: 32 },
  sha384: { alg: 'SHA-384', bytes: 48 },
  sha512: { alg: 'SHA-512', bytes: 64 },
};

/** integrityHashes turns an SRI string (`sha512-BASE64`, space-separated) into hex hashes. */
export function integrityHashes(integrity: string): Hash[] {
  return integrity
    .trim()
    .split(/\s+/)
    .map((sri) => {
      const dash = sri.indexOf('-');
      const known = HASH_ALGORITHMS[sri.slice(0, dash)];
      const digest = Buffer.from(sri.slice(dash + 1), 'base64');
      if (dash < 0 || known === undefined || digest.length !== known.bytes) {
        throw new Error(`integrity "${sri}" is not a sha1/256/384/512 SRI hash`);
      }
      return { alg: known.alg, content: digest.toString('hex') };
    });
}

/**
 * parseDpkgStatus reads `dpkg-query -s` output or a dpkg status file: paragraphs separated by
 * blank lines, `Field: value` lines, continuation lines starting with a space or tab. A paragraph
 * whose Status is not `… installed` (removed, config-files only) is skipped; distroless status.d
 * files may have no Status at all and count as installed. Throws naming `source` when a paragraph
 * lacks Package, Version or Architecture.
 */
export function parseDpkgStatus(text: string, source: string): DebPackage[] {
  const packages: DebPackage[] = [];
  for (const paragraph of text.split(/\r?\n(?:[ \t]*\r?\n)+/)) {
    const fields = new Map<string, string>();
    for (const line of paragraph.split(/\r?\n/)) {
      const colon = line.indexOf(':');
      if (line === '' || line.startsWith(' ') || line.startsWith('\t') || colon <= 0) continue;
      fields.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim());
    }
    if (fields.size === 0) continue;
    const status = fields.get('status');
    if (status !== undefined && status.split(/\s+/).at(-1) !== 'installed') continue;
    const name = fields.get('package');
    const version = fields.get('version');
    const architecture = fields.get('architecture');
    if (!name || !version || !architecture) {
      throw new Error(`${source}: a paragraph lacks Package, Version or Architecture (Package: ${name ?? 'none'})`);
    }
    packages.push({ name, version, architecture });
  }
  return packages;
}

/**
 * debianDistro is the purl distro of the base image, `debian-<major>` from base-files' version
 * (12.4+deb12u11 on bookworm); undefined without base-files.
 */
export function debianDistro(debs: readonly DebPackage[]): string | undefined {
  const major = /^(\d+)[.+~]/.exec(debs.find((d) => d.name === 'base-files')?.version ?? '')?.[1];
  return major === undefined ? undefined : `debian-${major}`;
}

function uniqueBy<T>(items: readonly T[], key: (item: T) => string): T[] {
  return [...new Map(items.map((item) => [key(item), item])).values()];
}

function sortedUnique(items: readonly string[]): string[] {
  return [...new Set(items)].toSorted(byCodeUnits);
}

function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
