/**
 * hack/release.ts — the work of hack/release.sh (read its header for usage): publish the image,
 * its SBOM and signature, and the Helm chart to an OCI registry.
 *
 *   1. The image: hack/build-image.sh (cached by its inputs) for every platform we can assemble
 *      (platformImages), each pushed by digest, then an OCI image index tagged VERSION naming them.
 *   2. Per platform: the SBOM (syft, CycloneDX JSON) attached with `oras attach` as a referrer.
 *   3. The signature: `cosign sign --recursive` of the index (the index and each platform manifest),
 *      stored by cosign as OCI referrers; then `cosign verify` with the public key, as a user would.
 *   4. The charts: charts/fencepost and the library chart charts/fencepost-sidecar (the agent
 *      sidecar's named templates, for application charts to depend on) copied, each one's
 *      templates/_image.tpl pinned to REGISTRY/fencepost:VERSION@INDEX, `helm package --version
 *      VERSION --app-version VERSION`, `helm push oci://REGISTRY/charts`.
 *   5. `oras discover` of each platform manifest: what a user sees attached to it.
 */
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseDockerfile } from '../test/support/image/dockerfile.ts';
import { crossArch } from './image/cross-arch.ts';
import { run } from './image/run.ts';

const ROOT = resolve(import.meta.dirname, '..');

/** Platform is an OCI platform of the published index. */
export interface Platform {
  readonly os: 'linux';
  readonly architecture: 'amd64' | 'arm64';
}

/** PlatformImage is one platform's image, as an archive of one manifest. */
interface PlatformImage {
  readonly platform: Platform;
  readonly archive: string;
  readonly digest: string;
}

/** ReleaseResult is what a release published; release.json holds it. */
export interface ReleaseResult {
  readonly version: string;
  readonly registry: string;
  readonly plainHttp: boolean;
  /** image is REGISTRY/fencepost:VERSION@INDEX_DIGEST: what the chart runs. */
  readonly image: string;
  readonly indexDigest: string;
  readonly platforms: readonly {
    readonly platform: string;
    readonly digest: string;
    readonly sbom: string;
    readonly referrers: readonly { readonly artifactType: string; readonly digest: string }[];
  }[];
  /** notBuilt names the platforms left out of the index, and why. */
  readonly notBuilt: readonly { readonly platform: string; readonly why: string }[];
  readonly chart: { readonly reference: string; readonly version: string; readonly digest: string };
  /** sidecarChart is the library chart fencepost-sidecar, for application charts' `dependencies:`. */
  readonly sidecarChart: { readonly reference: string; readonly version: string; readonly digest: string };
  readonly signedWith: { readonly publicKey: string; readonly madeForThisRun: boolean };
  readonly seconds: number;
}

const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$/;
const REGISTRY = /^[a-z0-9.-]+(?::\d+)?(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$/;

/** checkVersion refuses a VERSION that is not package.json's version or a prerelease of it. */
export function checkVersion(version: string, packageVersion: string): void {
  const m = SEMVER.exec(version);
  if (m === null)
    throw new Error(`VERSION ${JSON.stringify(version)}: want SemVer x.y.z or x.y.z-pre (e.g. 0.1.0-rc.1)`);
  const core = `${m[1] ?? ''}.${m[2] ?? ''}.${m[3] ?? ''}`;
  if (core !== packageVersion)
    throw new Error(
      `VERSION ${version}: the image is built from this tree, whose package.json says ${packageVersion}; release ${packageVersion} or a prerelease of it (${packageVersion}-rc.1)`,
    );
}

/** checkRegistry refuses a REGISTRY that is not host[:port][/namespace…] (no scheme, no tag). */
export function checkRegistry(registry: string): void {
  if (!REGISTRY.test(registry))
    throw new Error(
      `REGISTRY ${JSON.stringify(registry)}: want host[:port][/namespace] in lower case, without a scheme (e.g. ghcr.io/fencepost or 127.0.0.1:5000/fencepost)`,
    );
}

/** isLoopback says whether the registry's host is this machine, spoken to over plain HTTP. */
export function isLoopback(registry: string): boolean {
  const host = registry.split('/')[0]?.replace(/:\d+$/, '') ?? '';
  return host === '127.0.0.1' || host === 'localhost' || host === '[::1]';
}

/** CHARTS are the charts a release publishes, each with the name of its image template. */
export const CHARTS = [
  { name: 'fencepost', imageDefine: 'fencepost.defaultImage' },
  { name: 'fencepost-sidecar', imageDefine: 'fencepost-sidecar.defaultImage' },
] as const;

/** imageTemplate is a chart's templates/_image.tpl for the published image (define: its template name). */
export function imageTemplate(reference: string, define = 'fencepost.defaultImage'): string {
  return [
    '{{/*',
    `${define} is the fencepost image this chart release runs, pinned by digest by`,
    'hack/release.sh when it published the chart (the one source of the image for every template).',
    '*/}}',
    `{{- define "${define}" -}}`,
    reference,
    '{{- end }}',
    '',
  ].join('\n');
}

const log = (line: string): void => {
  process.stderr.write(`[release] ${line}\n`);
};

function sha256(bytes: Buffer | string): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/** defaultRegistry is $FENCEPOST_REGISTRY, else the running testbed's registry with /fencepost. */
function defaultRegistry(): string {
  const env = process.env['FENCEPOST_REGISTRY'];
  if (env !== undefined && env !== '') return env;
  const state = join(ROOT, '.testbed/state.json');
  if (existsSync(state)) {
    const s = JSON.parse(readFileSync(state, 'utf8')) as { registry?: string };
    if (s.registry !== undefined) return `${s.registry}/fencepost`;
  }
  throw new Error(
    'REGISTRY: none given, FENCEPOST_REGISTRY is unset and no testbed registry runs (npm run testbed:up -- --with-registry)',
  );
}

/**
 * platformImages builds the image (hack/build-image.sh: linux/amd64, this machine's) and assembles
 * linux/arm64 from it without emulation (hack/image/cross-arch.ts); FENCEPOST_RELEASE_PLATFORMS=
 * linux/amd64 publishes the built one alone.
 */
function platformImages(): { images: PlatformImage[]; notBuilt: { platform: string; why: string }[] } {
  const r = JSON.parse(run(join(ROOT, 'hack/build-image.sh'), ['--json']).trim().split('\n').at(-1) ?? '{}') as {
    archive: string;
    digest: string;
  };
  const images: PlatformImage[] = [
    { platform: { os: 'linux', architecture: 'amd64' }, archive: r.archive, digest: r.digest },
  ];
  const wanted = (process.env['FENCEPOST_RELEASE_PLATFORMS'] ?? 'linux/amd64,linux/arm64').split(',');
  if (!wanted.includes('linux/arm64'))
    return { images, notBuilt: [{ platform: 'linux/arm64', why: 'left out by FENCEPOST_RELEASE_PLATFORMS' }] };
  const pinned = parseDockerfile(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))[0]?.image ?? '';
  const nodeVersion = /node:(\d+\.\d+\.\d+)-/.exec(pinned)?.[1];
  if (nodeVersion === undefined) throw new Error(`Dockerfile NODE_IMAGE ${JSON.stringify(pinned)}: no node version`);
  const bunVersion = (
    JSON.parse(readFileSync(join(ROOT, 'node_modules/bun/package.json'), 'utf8')) as { version: string }
  ).version;
  const arm = crossArch({ archive: r.archive, digest: r.digest, nodeVersion, bunVersion });
  images.push({ platform: { os: 'linux', architecture: 'arm64' }, archive: arm.archive, digest: arm.digest });
  return { images, notBuilt: [] };
}

export function release(o: { version: string; registry: string; out: string }): ReleaseResult {
  const t0 = Date.now();
  const packageVersion = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  checkVersion(o.version, packageVersion);
  checkRegistry(o.registry);
  const plain = isLoopback(o.registry);
  const repo = `${o.registry}/fencepost`;
  mkdirSync(o.out, { recursive: true });

  const assets = run(join(ROOT, 'hack/testbed/build.sh'), ['helm', 'oras', 'syft', 'cosign']).trim().split('\n').at(-1);
  if (assets === undefined || assets === '') throw new Error('hack/testbed/build.sh printed no assets folder');
  const tool = (name: string): string => join(assets, name);
  const orasFlags = plain ? ['--plain-http'] : [];
  const oras = (args: readonly string[], cwd?: string): string =>
    run(tool('oras'), [...args, ...orasFlags], cwd !== undefined ? { cwd } : {});
  // cosign reads no update service and no transparency log here: a key pair, nothing online.
  const cosignEnv: NodeJS.ProcessEnv = { COSIGN_PASSWORD: process.env['COSIGN_PASSWORD'] ?? '' };
  const cosignFlags = plain ? ['--allow-insecure-registry', '--allow-http-registry'] : [];

  // 1. The image, per platform, pushed by digest; then the index.
  const { images, notBuilt } = platformImages();
  for (const img of images) {
    log(`pushing ${img.platform.os}/${img.platform.architecture} ${img.digest}`);
    run('skopeo', [
      'copy',
      '--quiet',
      '--preserve-digests',
      ...(plain ? ['--dest-tls-verify=false'] : []),
      `oci-archive:${img.archive}`,
      `docker://${repo}@${img.digest}`,
    ]);
  }
  const index = JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.index.v1+json',
    manifests: images.map((img) => {
      const raw = run(tool('oras'), ['manifest', 'fetch', ...orasFlags, `${repo}@${img.digest}`]);
      return {
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        digest: img.digest,
        size: Buffer.byteLength(raw),
        platform: img.platform,
      };
    }),
    annotations: {
      'org.opencontainers.image.version': o.version,
      'org.opencontainers.image.source': 'https://github.com/fencepost/fencepost',
    },
  });
  writeFileSync(join(o.out, 'index.json'), index);
  oras([
    'manifest',
    'push',
    '--media-type',
    'application/vnd.oci.image.index.v1+json',
    `${repo}:${o.version}`,
    join(o.out, 'index.json'),
  ]);
  const indexDigest = sha256(index);
  const image = `${repo}:${o.version}@${indexDigest}`;
  log(`image ${image}`);

  // 2. The SBOM of each platform, attached to its manifest.
  const sboms: string[] = [];
  for (const img of images) {
    const file = `sbom-${img.platform.architecture}.cdx.json`;
    // syft reads an OCI layout folder (its oci-archive reader refuses the tar's "./" entry).
    const layout = mkdtempSync(join(tmpdir(), 'fencepost-sbom-'));
    try {
      run('tar', ['-xf', img.archive, '-C', layout]);
      run(tool('syft'), ['scan', `oci-dir:${layout}`, '-q', '-o', `cyclonedx-json=${join(o.out, file)}`], {
        env: { SYFT_CHECK_FOR_APP_UPDATE: 'false' },
      });
    } finally {
      rmSync(layout, { recursive: true, force: true });
    }
    oras(
      [
        'attach',
        '--artifact-type',
        'application/vnd.cyclonedx+json',
        `${repo}@${img.digest}`,
        `${file}:application/vnd.cyclonedx+json`,
      ],
      o.out,
    );
    sboms.push(join(o.out, file));
  }

  // 3. The signature: of the index and, --recursive, of each platform's manifest.
  let key = process.env['COSIGN_KEY'] ?? '';
  const publicKey = join(o.out, 'cosign.pub');
  const madeForThisRun = key === '';
  if (madeForThisRun) {
    rmSync(join(o.out, 'cosign.key'), { force: true });
    rmSync(publicKey, { force: true });
    run(tool('cosign'), ['generate-key-pair', '--output-key-prefix', join(o.out, 'cosign')], { env: cosignEnv });
    key = join(o.out, 'cosign.key');
    log(`signing with a key pair made for this run: ${key} (set COSIGN_KEY for a real release)`);
  } else {
    run(tool('cosign'), ['public-key', '--key', key, '--outfile', publicKey], { env: cosignEnv });
  }
  run(
    tool('cosign'),
    [
      'sign',
      '--yes',
      '--key',
      key,
      '--recursive',
      '--tlog-upload=false',
      '--use-signing-config=false',
      ...cosignFlags,
      `${repo}@${indexDigest}`,
    ],
    { env: cosignEnv },
  );
  for (const ref of [indexDigest, ...images.map((i) => i.digest)])
    run(
      tool('cosign'),
      ['verify', '--key', publicKey, '--insecure-ignore-tlog=true', ...cosignFlags, `${repo}@${ref}`],
      { env: cosignEnv },
    );
  log(`signed and verified ${1 + images.length} manifest(s) with ${publicKey}`);

  // 4. The charts, each one's image pinned to the index by digest.
  const work = mkdtempSync(join(tmpdir(), 'fencepost-release-'));
  const pushed = new Map<string, { reference: string; version: string; digest: string }>();
  try {
    for (const c of CHARTS) {
      cpSync(join(ROOT, 'charts', c.name), join(work, c.name), { recursive: true });
      writeFileSync(join(work, c.name, 'templates/_image.tpl'), imageTemplate(image, c.imageDefine));
      run(tool('helm'), [
        'package',
        join(work, c.name),
        '--version',
        o.version,
        '--app-version',
        o.version,
        '--destination',
        o.out,
      ]);
      run(tool('helm'), [
        'push',
        join(o.out, `${c.name}-${o.version}.tgz`),
        `oci://${o.registry}/charts`,
        ...(plain ? ['--plain-http'] : []),
      ]);
      const digest = oras(['resolve', `${o.registry}/charts/${c.name}:${o.version}`]).trim();
      pushed.set(c.name, { reference: `oci://${o.registry}/charts/${c.name}`, version: o.version, digest });
      log(`chart ${c.name}: oci://${o.registry}/charts/${c.name} --version ${o.version} (${digest})`);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const pushedChart = (name: string): { reference: string; version: string; digest: string } => {
    const c = pushed.get(name);
    if (c === undefined) throw new Error(`release: chart ${name} was not pushed`);
    return c;
  };
  const chart = pushedChart('fencepost');
  const sidecarChart = pushedChart('fencepost-sidecar');

  // 5. What is attached to each platform's manifest.
  const platforms = images.map((img, i) => {
    const d = JSON.parse(oras(['discover', '--format', 'json', `${repo}@${img.digest}`])) as {
      referrers?: { artifactType: string; digest: string }[];
      manifests?: { artifactType: string; digest: string }[];
    };
    const referrers = (d.referrers ?? d.manifests ?? []).map((m) => ({
      artifactType: m.artifactType,
      digest: m.digest,
    }));
    return {
      platform: `${img.platform.os}/${img.platform.architecture}`,
      digest: img.digest,
      sbom: sboms[i] ?? '',
      referrers,
    };
  });
  const result: ReleaseResult = {
    version: o.version,
    registry: o.registry,
    plainHttp: plain,
    image,
    indexDigest,
    platforms,
    notBuilt,
    chart,
    sidecarChart,
    signedWith: { publicKey, madeForThisRun },
    seconds: (Date.now() - t0) / 1000,
  };
  writeFileSync(join(o.out, 'release.json'), `${JSON.stringify(result, null, 2)}\n`);
  return result;
}

/** summary is the release in lines a person reads. */
export function summary(r: ReleaseResult): string {
  const lines = [
    `registry   ${r.registry}${r.plainHttp ? ' (plain HTTP: loopback)' : ''}`,
    `image      ${r.image}`,
    ...r.platforms.flatMap((p) => [
      `  ${p.platform.padEnd(12)} ${p.digest}`,
      ...p.referrers.map((x) => `    referrer ${x.artifactType} ${x.digest}`),
    ]),
    ...r.notBuilt.map((n) => `  ${n.platform.padEnd(12)} not published: ${n.why}`),
    `chart      helm install fencepost ${r.chart.reference} --version ${r.chart.version}   (${r.chart.digest})`,
    `library    ${r.sidecarChart.reference} --version ${r.sidecarChart.version} (app charts' dependencies:)   (${r.sidecarChart.digest})`,
    `signed     ${r.signedWith.publicKey}${r.signedWith.madeForThisRun ? ' (key pair made for this run)' : ''}`,
    `took       ${r.seconds.toFixed(1)} s`,
  ];
  return `${lines.join('\n')}\n`;
}

if (import.meta.main) {
  const { positionals } = parseArgs({ allowPositionals: true, options: {} });
  try {
    const [version, registryArg] = positionals;
    if (version === undefined) throw new Error('usage: hack/release.sh VERSION [REGISTRY]');
    const registry = registryArg ?? defaultRegistry();
    const out = resolve(process.env['FENCEPOST_RELEASE_OUT'] ?? join(ROOT, 'dist/release', version));
    const r = release({ version, registry, out });
    process.stderr.write(summary(r));
    process.stdout.write(`${JSON.stringify(r)}\n`);
  } catch (err) {
    process.stderr.write(`release: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
