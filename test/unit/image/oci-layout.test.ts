import { describe, expect, it } from 'vitest';
import { blobPath, dockerArchiveManifest, imageName, namedIndex } from '../../../hack/image/oci-layout.ts';

const digest = (c: string): string => `sha256:${c.repeat(64)}`;

describe("the image archive's tables of contents", () => {
  it('qualifies image names as Docker does', () => {
    expect(imageName('fencepost:0.1.0')).toEqual({
      full: 'docker.io/library/fencepost:0.1.0',
      short: 'fencepost:0.1.0',
      tag: '0.1.0',
    });
    expect(imageName('acme/fencepost:1.2.3').full).toBe('docker.io/acme/fencepost:1.2.3');
    expect(imageName('registry.local:5000/team/fencepost:1').full).toBe('registry.local:5000/team/fencepost:1');
    expect(imageName('localhost/fencepost:dev').short).toBe('localhost/fencepost:dev');
    expect(() => imageName('fencepost')).toThrow(/want repository:tag/);
  });

  it('names the one manifest for containerd (full reference) and for OCI tools (the tag)', () => {
    const index = {
      schemaVersion: 2,
      manifests: [{ mediaType: 'application/vnd.oci.image.manifest.v1+json', digest: digest('a'), size: 621 }],
    };
    const named = namedIndex(index, imageName('fencepost:0.1.0'));
    expect(named.manifests).toHaveLength(1);
    expect(named.manifests[0]?.digest).toBe(digest('a'));
    expect(named.manifests[0]?.annotations).toEqual({
      'io.containerd.image.name': 'docker.io/library/fencepost:0.1.0',
      'org.opencontainers.image.ref.name': '0.1.0',
    });
    expect(() => namedIndex({ schemaVersion: 2, manifests: [] }, imageName('x:1'))).toThrow(/0 manifests/);
  });

  it("points docker load's manifest.json at the same blobs", () => {
    const manifest = {
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: digest('c'), size: 1 },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: digest('d'), size: 2 }],
    };
    expect(dockerArchiveManifest(manifest, imageName('fencepost:0.1.0'))).toEqual([
      {
        Config: `blobs/sha256/${'c'.repeat(64)}`,
        RepoTags: ['fencepost:0.1.0'],
        Layers: [`blobs/sha256/${'d'.repeat(64)}`],
      },
    ]);
    expect(() => blobPath('md5:abc')).toThrow(/want sha256/);
  });
});
