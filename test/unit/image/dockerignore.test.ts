import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseDockerfile } from '../../support/image/dockerfile.ts';
import { parseDockerIgnore, readDockerIgnore } from '../../support/image/dockerignore.ts';

const ROOT = resolve(import.meta.dirname, '../../..');

describe('.dockerignore as a builder applies it', () => {
  const ignore = parseDockerIgnore(
    '# only what is copied\n*\n!package.json\n!src/\n!hack/build-agent.ts\nsrc/**/*.test.ts\n',
  );

  it('excludes what `*` matches and re-includes what a later `!` names, folders with their contents', () => {
    expect(ignore.included('README.md')).toBe(false);
    expect(ignore.included('hack/bootstrap-node.sh')).toBe(false);
    expect(ignore.included('package.json')).toBe(true);
    expect(ignore.included('src/cli/main.ts')).toBe(true);
    expect(ignore.included('hack/build-agent.ts')).toBe(true);
  });

  it('lets the last matching pattern decide, `**` crossing folders', () => {
    expect(ignore.included('src/cli/main.test.ts')).toBe(false);
    expect(ignore.included('src/main.test.ts')).toBe(false);
  });

  it('includes everything without a .dockerignore', () => {
    expect(parseDockerIgnore('').included('anything/at/all')).toBe(true);
  });

  it('sends every path our Dockerfile copies from the context (a COPY of an excluded path fails the build)', () => {
    const copied = parseDockerfile(readFileSync(resolve(ROOT, 'Dockerfile'), 'utf8'))
      .flatMap((s) => s.instructions)
      .filter((i) => i.keyword === 'COPY' && !i.args.startsWith('--from='))
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1));
    expect(copied).toContain('hack/build-agent.ts');
    const ours = readDockerIgnore(ROOT);
    expect(copied.filter((p) => !ours.included(p))).toEqual([]);
  });
});
