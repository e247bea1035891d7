import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHARTS, checkRegistry, checkVersion, imageTemplate, isLoopback } from '../../../hack/release.ts';
import { dpkgStatus, elfMachine } from '../../../hack/image/cross-arch.ts';

const ROOT = resolve(import.meta.dirname, '../../..');
const read = (p: string): string => readFileSync(join(ROOT, p), 'utf8');

describe('hack/release.sh input', () => {
  it("takes package.json's version or a prerelease of it, and names VERSION otherwise", () => {
    expect(() => checkVersion('0.1.0', '0.1.0')).not.toThrow();
    expect(() => checkVersion('0.1.0-rc.1', '0.1.0')).not.toThrow();
    expect(() => checkVersion('0.2.0', '0.1.0')).toThrow(/VERSION 0\.2\.0: .*package\.json says 0\.1\.0/);
    expect(() => checkVersion('v0.1.0', '0.1.0')).toThrow(/VERSION "v0\.1\.0": want SemVer/);
    expect(() => checkVersion('0.1', '0.1.0')).toThrow(/VERSION "0\.1"/);
  });

  it('takes host[:port][/namespace] as REGISTRY and names it otherwise; loopback hosts are plain HTTP', () => {
    for (const ok of ['ghcr.io/fencepost', '127.0.0.1:5000/fencepost', 'localhost:5000', 'registry.example.com'])
      expect(() => checkRegistry(ok), ok).not.toThrow();
    for (const bad of ['https://ghcr.io/fencepost', 'ghcr.io/Fencepost', 'ghcr.io/fencepost:1', ''])
      expect(() => checkRegistry(bad), bad).toThrow(/^REGISTRY /);
    expect(isLoopback('127.0.0.1:5000/fencepost')).toBe(true);
    expect(isLoopback('localhost:5000')).toBe(true);
    expect(isLoopback('ghcr.io/fencepost')).toBe(false);
    expect(isLoopback('127.0.0.1.example.com/x')).toBe(false);
  });

  it("pins the published chart's one image source by digest", () => {
    const ref = `127.0.0.1:5000/fencepost/fencepost:0.1.0@sha256:${'a'.repeat(64)}`;
    const tpl = imageTemplate(ref);
    expect(tpl).toContain('{{- define "fencepost.defaultImage" -}}\n' + ref + '\n{{- end }}');
    // The library chart's too: an app chart's sidecar runs the same image, pinned the same way.
    expect(CHARTS.map((c) => c.name)).toEqual(['fencepost', 'fencepost-sidecar']);
    expect(imageTemplate(ref, 'fencepost-sidecar.defaultImage')).toContain(
      '{{- define "fencepost-sidecar.defaultImage" -}}\n' + ref + '\n{{- end }}',
    );
  });
});

describe('the image reference: one source', () => {
  const tpl = read('charts/fencepost/templates/_image.tpl');
  const image = /define "fencepost\.defaultImage" -}}\n(\S+)\n/.exec(tpl)?.[1] ?? '';
  const appVersion = /^appVersion: "?([^"\n]+)"?$/m.exec(read('charts/fencepost/Chart.yaml'))?.[1];

  it("is templates/_image.tpl, tagged with the chart's appVersion", () => {
    expect(image).toBe(`ghcr.io/fencepost/fencepost:${appVersion ?? ''}`);
  });

  it("is the library chart fencepost-sidecar's default too, with the same versions", () => {
    const lib = read('charts/fencepost-sidecar/templates/_image.tpl');
    expect(/define "fencepost-sidecar\.defaultImage" -}}\n(\S+)\n/.exec(lib)?.[1]).toBe(image);
    const chart = read('charts/fencepost-sidecar/Chart.yaml');
    expect(/^appVersion: "?([^"\n]+)"?$/m.exec(chart)?.[1]).toBe(appVersion);
    expect(/^version: (\S+)$/m.exec(chart)?.[1]).toBe(
      /^version: (\S+)$/m.exec(read('charts/fencepost/Chart.yaml'))?.[1],
    );
  });

  it('is what every template, example and doc names (no other fencepost image reference)', () => {
    const files = [
      ...readdirSync(join(ROOT, 'charts/fencepost/templates')).map((f) => `charts/fencepost/templates/${f}`),
      'charts/fencepost/values.yaml',
      'charts/fencepost/README.md',
      ...readdirSync(join(ROOT, 'charts/fencepost-sidecar/templates')).map(
        (f) => `charts/fencepost-sidecar/templates/${f}`,
      ),
      'charts/fencepost-sidecar/README.md',
      ...readdirSync(join(ROOT, 'examples')).map((f) => `examples/${f}`),
      ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`),
      'README.md',
    ].filter((f) => !f.endsWith('/_image.tpl') && /\.(ya?ml|tpl|md|ts|txt)$/.test(f));
    const refs = files.flatMap((f) =>
      [...read(f).matchAll(/ghcr\.io\/fencepost\/fencepost(?::[\w.-]+)?/g)].map((m) => `${f}: ${m[0]}`),
    );
    expect(refs.length).toBeGreaterThan(3);
    expect(refs.filter((r) => !r.endsWith(`: ${image}`))).toEqual([]);
    // The templates take it from the one source, never a literal.
    for (const f of files.filter((x) => /^charts\/fencepost(-sidecar)?\/templates\//.test(x)))
      expect(read(f), f).not.toMatch(/ghcr\.io\/fencepost/);
  });
});

describe('hack/image/cross-arch.ts', () => {
  it("reads an ELF file's machine, either byte order, and nothing from other files", () => {
    const elf = (machine: number, big = false): Buffer => {
      const b = Buffer.alloc(20);
      b.writeUInt32BE(0x7f454c46, 0);
      b[5] = big ? 2 : 1;
      if (big) b.writeUInt16BE(machine, 18);
      else b.writeUInt16LE(machine, 18);
      return b;
    };
    expect(elfMachine(elf(0x3e))).toBe('amd64');
    expect(elfMachine(elf(0xb7))).toBe('arm64');
    expect(elfMachine(elf(0xb7, true))).toBe('arm64');
    expect(elfMachine(Buffer.from('#!/bin/sh\necho hello world\n'))).toBeUndefined();
    expect(elfMachine(Buffer.alloc(4))).toBeUndefined();
  });

  it("writes a package's dpkg record as dpkg-query -s prints an installed one", () => {
    const control = 'Package: libc6\nSource: glibc\nVersion: 2.36-9+deb12u14\nArchitecture: arm64\n';
    expect(dpkgStatus(control)).toBe(
      'Package: libc6\nStatus: install ok installed\nSource: glibc\nVersion: 2.36-9+deb12u14\nArchitecture: arm64\n',
    );
  });
});
