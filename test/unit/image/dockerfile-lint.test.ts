import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { lintDockerfile, locallySkipped, parseDockerfile } from '../../support/image/dockerfile.ts';

const ours = readFileSync(resolve(import.meta.dirname, '../../../Dockerfile'), 'utf8');

/** good is a minimal Dockerfile that passes every rule; each case below breaks one. */
const DIGEST = `sha256:${'ab'.repeat(32)}`;
const good = `ARG BASE=node:24.21.0-bookworm-slim@${DIGEST}
FROM \${BASE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev
COPY src/ src/
FROM node:24.21.0-bookworm-slim@${DIGEST}
WORKDIR /app
COPY --from=build /src/node_modules ./node_modules
USER 65532:65532
ENTRYPOINT ["node", "/app/main.js"]
`;

describe('the Dockerfile rule checker', () => {
  it('finds nothing wrong with our Dockerfile', () => {
    expect(lintDockerfile(ours)).toEqual([]);
  });

  it('parses our Dockerfile into its stages, the last one unnamed, with continuation lines joined and the base ARG resolved', () => {
    const stages = parseDockerfile(ours);
    expect(stages.map((s) => s.name)).toEqual(['deps', 'build', 'runtime-root', undefined]);
    expect(stages[0]?.image).toMatch(/^node:24\.21\.0-bookworm-slim@sha256:[0-9a-f]{64}$/);
    expect(stages.at(-1)?.image).toBe('scratch');
    expect(parseDockerfile(ours, { NODE_IMAGE: 'localhost/base:1' })[1]?.image).toBe('localhost/base:1');
    expect(stages[0]?.instructions.find((i) => i.keyword === 'RUN')?.args).toMatch(
      /npm ci --omit=dev .* && find node_modules/,
    );
  });

  it('passes the minimal good file', () => {
    expect(lintDockerfile(good)).toEqual([]);
  });

  it('skips the base-carving stages locally, and what is built from them', () => {
    expect([...locallySkipped(parseDockerfile(ours))].sort()).toEqual(['runtime-root']);
    // A -root stage may use absolute paths (it carves the base's own files); a build stage may not.
    const carving = good.replace(
      'FROM ${BASE} AS build',
      'FROM ${BASE} AS os-root\nRUN cp /etc/passwd etc/\nFROM ${BASE} AS build',
    );
    expect(lintDockerfile(carving)).toEqual([]);
  });

  it('names the ARG a FROM uses when no ARG declares it', () => {
    expect(() => parseDockerfile('FROM ${NOPE}\n')).toThrow(/Dockerfile:1: FROM uses \$NOPE/);
  });

  const cases: [string, string, string][] = [
    ['an untagged base image', good.replace('FROM ${BASE} AS build', 'FROM node AS build'), 'DL3006'],
    [
      'a latest base image',
      good.replace(`FROM node:24.21.0-bookworm-slim@${DIGEST}\n`, 'FROM node:latest\n'),
      'DL3007',
    ],
    [
      'a moving tag',
      good.replace(`FROM node:24.21.0-bookworm-slim@${DIGEST}\n`, `FROM node:24-slim@${DIGEST}\n`),
      'pinned-version',
    ],
    [
      'a base without a digest',
      good.replace(`FROM node:24.21.0-bookworm-slim@${DIGEST}\n`, 'FROM node:24.21.0-bookworm-slim\n'),
      'pinned-digest',
    ],
    [
      'a global ARG base without a digest',
      good.replace(`ARG BASE=node:24.21.0-bookworm-slim@${DIGEST}`, 'ARG BASE=node:24.21.0-bookworm-slim'),
      'pinned-digest',
    ],
    ['no USER in the final stage', good.replace('USER 65532:65532\n', ''), 'non-root'],
    ['USER root', good.replace('USER 65532:65532', 'USER root'), 'non-root'],
    ['USER 0', good.replace('USER 65532:65532', 'USER 0'), 'non-root'],
    ['a user name (runAsNonRoot cannot check it)', good.replace('USER 65532:65532', 'USER node'), 'non-root'],
    ['npm install', good.replace('RUN npm ci --omit=dev', 'RUN npm install --omit=dev && npm ci --omit=dev'), 'npm-ci'],
    ['no npm ci --omit=dev', good.replace('RUN npm ci --omit=dev', 'RUN npm ci'), 'omit-dev'],
    [
      'sources before the lockfile',
      good.replace(
        'COPY package.json package-lock.json ./\nRUN npm ci --omit=dev\nCOPY src/ src/',
        'COPY src/ src/\nCOPY package.json package-lock.json ./\nRUN npm ci --omit=dev',
      ),
      'lockfile-first',
    ],
    [
      'COPY . before the lockfile',
      good.replace('COPY package.json package-lock.json ./', 'COPY . .'),
      'lockfile-first',
    ],
    ['ADD', good.replace('COPY src/ src/', 'ADD src/ src/'), 'DL3020'],
    ['a relative WORKDIR', good.replace('WORKDIR /app', 'WORKDIR app'), 'DL3000'],
    [
      'a shell-form ENTRYPOINT',
      good.replace('ENTRYPOINT ["node", "/app/main.js"]', 'ENTRYPOINT node /app/main.js'),
      'DL3025',
    ],
    ['sudo', good.replace('RUN npm ci --omit=dev', 'RUN sudo npm ci --omit=dev'), 'DL3004'],
    ['a secret in ENV', good.replace('USER 65532:65532', 'ENV REDIS_PASSWORD=hunter2\nUSER 65532:65532'), 'no-secrets'],
    [
      'an absolute path in a build RUN',
      good.replace('RUN npm ci --omit=dev', 'RUN npm ci --omit=dev && cp -r node_modules /out'),
      'relative-run',
    ],
    [
      'a single stage',
      `FROM node:24.21.0-bookworm-slim@${DIGEST}\nWORKDIR /app\nCOPY package.json package-lock.json ./\nRUN npm ci --omit=dev\nUSER 65532\nENTRYPOINT ["node"]\n`,
      'multi-stage',
    ],
  ];
  it.each(cases)('flags %s', (_what, text, rule) => {
    expect(lintDockerfile(text).map((f) => f.rule)).toContain(rule);
  });
});
