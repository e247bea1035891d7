/**
 * The real image for the tests: the archive hack/build-image.sh writes (built once per change of
 * its inputs, cached), unpacked once per digest into a root filesystem that crun runs read-only.
 *
 * FENCEPOST_IMAGE_ARCHIVE names an archive built beforehand (.ci/run builds it before the tests, so
 * that no test waits minutes for a build); without it, the first caller runs hack/build-image.sh.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { imageCacheDir, keepNewest, touch } from '../../../hack/image/cache.ts';
import type { ImageConfig } from './oci-config.ts';

const ROOT = resolve(import.meta.dirname, '../../..');

/** ImageRootfs is an unpacked image: its files, its config and the digest they came from. */
export interface ImageRootfs {
  readonly rootfs: string;
  readonly config: ImageConfig;
  /** digest is the image manifest's digest (the archive's). */
  readonly digest: string;
  readonly archive: string;
  /** files lists every path in the image (relative, no leading slash), sorted. */
  readonly files: readonly string[];
}

function run(cmd: string, args: readonly string[]): string {
  const r = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} exited ${String(r.status ?? r.signal)}: ${r.stderr.slice(-4000)}`);
  return r.stdout;
}

/** ensureImageArchive returns the image archive's path, building it (cached) unless one was named. */
export function ensureImageArchive(): string {
  const named = process.env.FENCEPOST_IMAGE_ARCHIVE;
  if (named !== undefined && named !== '') {
    if (!existsSync(named)) throw new Error(`FENCEPOST_IMAGE_ARCHIVE=${named}: no such file`);
    return resolve(named);
  }
  return run(join(ROOT, 'hack/build-image.sh'), []).trim().split('\n').at(-1) ?? '';
}

interface Index {
  readonly manifests: readonly { readonly digest: string; readonly annotations?: Record<string, string> }[];
}

let memo: ImageRootfs | undefined;

/**
 * unpackOnce unpacks the image that `fill(layout)` puts into an OCI layout (tagged `tag`) into the
 * cache, once per manifest digest: every container of every test shares it read-only. Safe to call
 * from parallel workers: each unpacks into its own folder and the first rename wins.
 */
function unpackOnce(
  digest: string,
  tag: string,
  fill: (layout: string) => void,
): { dir: string; config: ImageConfig; files: string[] } {
  const hex = digest.replace(/^sha256:/, '');
  const dir = join(imageCacheDir(), 'rootfs', hex.slice(0, 24));
  if (!existsSync(join(dir, 'rootfs'))) {
    mkdirSync(join(imageCacheDir(), 'rootfs'), { recursive: true });
    const tmp = mkdtempSync(join(imageCacheDir(), 'rootfs', '.unpack-'));
    try {
      mkdirSync(join(tmp, 'layout'));
      fill(join(tmp, 'layout'));
      run('umoci', ['unpack', '--image', `${join(tmp, 'layout')}:${tag}`, join(tmp, 'bundle')]);
      const manifest = JSON.parse(readFileSync(join(tmp, 'layout', 'blobs', 'sha256', hex), 'utf8')) as {
        config: { digest: string };
      };
      const config = readFileSync(
        join(tmp, 'layout', 'blobs', 'sha256', manifest.config.digest.replace(/^sha256:/, '')),
      );
      mkdirSync(join(tmp, 'out'));
      renameSync(join(tmp, 'bundle', 'rootfs'), join(tmp, 'out', 'rootfs'));
      // The image config (Entrypoint, Env, User…), as the image declares it.
      writeFileSync(join(tmp, 'out', 'image-config.json'), config);
      try {
        renameSync(join(tmp, 'out'), dir);
      } catch (err) {
        if (!existsSync(join(dir, 'rootfs'))) throw err; // else another worker won the race
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
  touch(dir);
  keepNewest(join(imageCacheDir(), 'rootfs'), 3);
  const config =
    (JSON.parse(readFileSync(join(dir, 'image-config.json'), 'utf8')) as { config?: ImageConfig }).config ?? {};
  const files = run('find', [join(dir, 'rootfs'), '-mindepth', '1', '-printf', '%P\n'])
    .split('\n')
    .filter((f) => f !== '')
    .sort();
  return { dir, config, files };
}

/** ensureImageRootfs unpacks the archive (umoci, keeping owners and modes) into the cache, once per digest. */
export function ensureImageRootfs(): Promise<ImageRootfs> {
  if (memo !== undefined) return Promise.resolve(memo);
  const archive = ensureImageArchive();
  const index = JSON.parse(run('tar', ['-xOf', archive, './index.json'])) as Index;
  const top = index.manifests[0];
  if (top === undefined) throw new Error(`${archive}: index.json lists no image`);
  const digest = top.digest;
  const tag = top.annotations?.['org.opencontainers.image.ref.name'] ?? 'latest';
  const { dir, config, files } = unpackOnce(digest, tag, (layout) => run('tar', ['-xf', archive, '-C', layout]));
  memo = { rootfs: join(dir, 'rootfs'), config, digest, archive, files };
  return Promise.resolve(memo);
}

/** PulledImage is an image pulled from a registry and unpacked: what a node's runtime would run. */
export interface PulledImage {
  readonly reference: string;
  readonly rootfs: string;
  readonly config: ImageConfig;
  /** digest is the manifest's digest of this machine's platform (an index resolves to one of its manifests). */
  readonly digest: string;
}

const pulled = new Map<string, PulledImage>();

/**
 * pullImageRootfs pulls reference (REGISTRY/REPO[:TAG]@sha256:…, or a tag) from its registry
 * with skopeo — the manifest of this machine's platform when it names an index — and unpacks it
 * once per digest, as a kubelet's runtime pulls an image. Loopback registries are plain HTTP.
 */
export function pullImageRootfs(reference: string): PulledImage {
  const known = pulled.get(reference);
  if (known !== undefined) return known;
  // containers/image takes a tag or a digest, not both: a digest pins the image, so it wins.
  const pinned = reference.replace(/:[^/:@]+(@sha256:[0-9a-f]{64})$/, '$1');
  const host = reference.split('/')[0] ?? '';
  const plain = /^(127\.0\.0\.1|localhost)(:\d+)?$/.test(host);
  const tls = plain ? ['--tls-verify=false'] : [];
  const manifest = run('skopeo', ['inspect', ...tls, '--raw', `docker://${pinned}`]);
  const index = JSON.parse(manifest) as {
    manifests?: { digest: string; platform?: { architecture?: string; os?: string } }[];
  };
  const arch = process.arch === 'x64' ? 'amd64' : process.arch;
  const digest =
    index.manifests === undefined
      ? `sha256:${createHash('sha256').update(manifest).digest('hex')}`
      : index.manifests.find((m) => m.platform?.os === 'linux' && m.platform.architecture === arch)?.digest;
  if (digest === undefined) throw new Error(`${reference}: the index has no linux/${arch} image`);
  const repo = reference.replace(/@sha256:[0-9a-f]{64}$/, '').replace(/:[^/:]+$/, '');
  const { dir, config } = unpackOnce(digest, 'pulled', (layout) =>
    run('skopeo', [
      'copy',
      '--quiet',
      '--preserve-digests',
      ...(plain ? ['--src-tls-verify=false'] : []),
      `docker://${repo}@${digest}`,
      `oci:${layout}:pulled`,
    ]),
  );
  const image: PulledImage = { reference, rootfs: join(dir, 'rootfs'), config, digest };
  pulled.set(reference, image);
  return image;
}
