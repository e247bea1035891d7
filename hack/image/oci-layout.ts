/**
 * The archive's two tables of contents, as pure functions of an OCI layout's index and manifest.
 *
 * One tar serves every loader: an OCI image layout (oci-layout, index.json, blobs/) is what
 * `podman load`, `skopeo`, containerd (`ctr import`, `kind load image-archive`) and Docker 25+
 * read; a docker-archive `manifest.json` beside it, pointing at the same blobs, is what older
 * `docker load` reads. The image's name travels in two annotations: containerd's full reference
 * (io.containerd.image.name) and the OCI tag (org.opencontainers.image.ref.name).
 */

/** Descriptor is an OCI content descriptor. */
export interface Descriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly annotations?: Readonly<Record<string, string>>;
}

/** OciIndex is an OCI image index (index.json). */
export interface OciIndex {
  readonly schemaVersion: number;
  readonly mediaType?: string;
  readonly manifests: readonly Descriptor[];
}

/** OciManifest is an OCI image manifest. */
export interface OciManifest {
  readonly config: Descriptor;
  readonly layers: readonly Descriptor[];
}

/** DockerArchiveEntry is one image of a docker-archive manifest.json. */
export interface DockerArchiveEntry {
  readonly Config: string;
  readonly RepoTags: readonly string[];
  readonly Layers: readonly string[];
}

/** ImageName splits a reference such as docker.io/library/fencepost:0.1.0. */
export interface ImageName {
  /** full is the fully qualified reference: registry/repository:tag. */
  readonly full: string;
  /** short is what `docker images` shows for Docker Hub's library: fencepost:0.1.0. */
  readonly short: string;
  readonly tag: string;
}

/** imageName qualifies `repository:tag` the way Docker does (docker.io/library/ for a bare name). */
export function imageName(reference: string): ImageName {
  const m = /^(.+):([\w][\w.-]{0,127})$/.exec(reference);
  if (m === null) throw new Error(`image reference ${JSON.stringify(reference)}: want repository:tag`);
  const [repo = '', tag = ''] = [m[1], m[2]];
  const first = repo.split('/')[0] ?? '';
  const hasRegistry = repo.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  const full = hasRegistry ? repo : repo.includes('/') ? `docker.io/${repo}` : `docker.io/library/${repo}`;
  const short = full.replace(/^docker\.io\/library\//, '').replace(/^docker\.io\//, '');
  return { full: `${full}:${tag}`, short: `${short}:${tag}`, tag };
}

/** blobPath is where a digest's bytes live in an OCI layout. */
export function blobPath(digest: string): string {
  const m = /^(sha256|sha512):([0-9a-f]+)$/.exec(digest);
  if (m === null) throw new Error(`digest ${JSON.stringify(digest)}: want sha256:<hex>`);
  return `blobs/${m[1] ?? ''}/${m[2] ?? ''}`;
}

/**
 * namedIndex returns the layout's index with its one image manifest named for every loader.
 * A layout holding anything other than exactly one manifest is refused: the archive is one image.
 */
export function namedIndex(index: OciIndex, name: ImageName): OciIndex {
  if (index.manifests.length !== 1)
    throw new Error(`index.json lists ${index.manifests.length} manifests: want exactly one image`);
  const [only] = index.manifests;
  if (only === undefined) throw new Error('index.json lists no manifest');
  return {
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.index.v1+json',
    manifests: [
      {
        mediaType: only.mediaType,
        digest: only.digest,
        size: only.size,
        annotations: {
          'io.containerd.image.name': name.full,
          'org.opencontainers.image.ref.name': name.tag,
        },
      },
    ],
  };
}

/** dockerArchiveManifest is the manifest.json that lets a pre-OCI `docker load` read the same blobs. */
export function dockerArchiveManifest(manifest: OciManifest, name: ImageName): DockerArchiveEntry[] {
  return [
    {
      Config: blobPath(manifest.config.digest),
      RepoTags: [name.short],
      Layers: manifest.layers.map((l) => blobPath(l.digest)),
    },
  ];
}
