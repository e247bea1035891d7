/**
 * build-image-tree.ts — `node hack/build-image-tree.ts [OUT]`: runs the Dockerfile's build steps
 * locally (no Docker engine needed; test/support/image/dockerfile.ts says how) and prints the
 * size of the application tree the image would hold (/app: package.json, production
 * node_modules, dist/src, crds) and of the Node binary the base image brings. OUT defaults to a
 * temporary folder, removed afterwards.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { buildLocally, lintDockerfile } from '../test/support/image/dockerfile.ts';

const root = resolve(import.meta.dirname, '..');
const out = process.argv[2] ?? mkdtempSync(join(tmpdir(), 'fencepost-image-'));
const findings = lintDockerfile(execFileSync('cat', [join(root, 'Dockerfile')], { encoding: 'utf8' }));
for (const f of findings) process.stderr.write(`Dockerfile:${f.line}: ${f.rule}: ${f.message}\n`);
if (findings.length > 0) process.exit(1);
const started = performance.now();
const fsRoot = buildLocally(join(root, 'Dockerfile'), {
  context: root,
  dir: out,
  env: { ...process.env, npm_config_prefer_offline: 'true', npm_config_loglevel: 'error' },
  log: (line) => process.stderr.write(`[image] ${line}\n`),
});
const app = join(fsRoot, 'app');
const kib = (path: string): number => Number(execFileSync('du', ['-sk', path], { encoding: 'utf8' }).split('\t')[0]);
const mib = (k: number): string => (k / 1024).toFixed(1);
const nodeMiB = statSync(process.execPath).size / 1024 / 1024;
process.stdout.write(
  `application tree ${app}: ${mib(kib(app))} MiB ` +
    `(node_modules ${mib(kib(join(app, 'node_modules')))} MiB, dist ${mib(kib(join(app, 'dist')))} MiB, crds ${mib(kib(join(app, 'crds')))} MiB)\n` +
    `node binary ${process.version}: ${nodeMiB.toFixed(1)} MiB; built in ${((performance.now() - started) / 1000).toFixed(0)} s\n`,
);
if (process.argv[2] === undefined) rmSync(out, { recursive: true, force: true });
