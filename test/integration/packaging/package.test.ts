// The npm package as a user installs it: packed by `npm pack`, whose prepack script builds it
// (so package.json "files" decides what ships), installed by `npm install <tarball>` into an empty
// project, then tested there by a test of its own (node --test) that imports acquire and the
// guards, imported by its subpaths, type-checked against the shipped declarations, and run
// through its bin. Needs no servers.
import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { traceModules, type ModuleTrace } from '../../support/module-trace.ts';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../../..');
const tsc = join(root, 'node_modules/typescript/bin/tsc');
// npm from the Node that runs the tests (hack/npm puts it first on PATH; it may be a shell script).
const npmEnv = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env['PATH'] ?? ''}` };

interface PackageJson {
  readonly name: string;
  readonly dependencies: Readonly<Record<string, string>>;
  readonly exports: Readonly<Record<string, string | Readonly<Record<string, string>>>>;
  readonly types: string;
  readonly bin: Readonly<Record<string, string>>;
}
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as PackageJson;

/** CONSUMER_TSCONFIG: a strict ESM consumer resolving the package the way Node does (nodenext). */
const consumerTsconfig = (file: string, skipLibCheck: boolean): string =>
  JSON.stringify({
    compilerOptions: {
      target: 'es2024',
      lib: ['es2024', 'esnext.disposable'],
      module: 'nodenext',
      moduleResolution: 'nodenext',
      strict: true,
      noEmit: true,
      types: ['node'],
      skipLibCheck,
    },
    files: [file],
  });

describe('the fencepost npm package', () => {
  let dir = '';
  let consumer = '';
  let shipped: string[] = [];
  let tarball = '';
  const installed = (path: string): string => join(consumer, 'node_modules/fencepost', path);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-package-'));
    // 1. Pack a copy of the checkout: `npm pack` runs the package's own prepack (a clean build into
    //    dist/src), so the repository's dist/ is not touched and a stale build cannot ship.
    const stage = join(dir, 'stage');
    mkdirSync(stage);
    for (const f of ['package.json', 'README.md', 'LICENSE', 'crds', 'src', 'tsconfig.json', 'tsconfig.build.json'])
      cpSync(join(root, f), join(stage, f), { recursive: true });
    symlinkSync(join(root, 'node_modules'), join(stage, 'node_modules'));
    const packed = JSON.parse(
      (await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: stage, env: npmEnv })).stdout,
    ) as { filename: string; files: { path: string }[] }[];
    shipped = packed[0]?.files.map((f) => f.path) ?? [];
    tarball = join(dir, packed[0]?.filename ?? '');
    // 2. Install it as a user does, into an empty project: npm resolves its dependencies (from npm's
    //    cache when warm, else the registry). @types/node for the type-checking consumers below.
    consumer = join(dir, 'consumer');
    mkdirSync(consumer);
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', type: 'module', private: true }));
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball], {
      cwd: consumer,
      env: npmEnv,
    });
    mkdirSync(join(consumer, 'node_modules/@types'), { recursive: true });
    if (!existsSync(join(consumer, 'node_modules/@types/node')))
      symlinkSync(join(root, 'node_modules/@types/node'), join(consumer, 'node_modules/@types/node'));
  }, 300_000);
  afterAll(() => {
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('ships the build with its declarations, the CRD, the agent API contract and the README, and no sources or tests', () => {
    expect(shipped).toEqual(
      expect.arrayContaining([
        'package.json',
        'README.md',
        'LICENSE',
        'crds/distributedlocks.fencepost.io.yaml',
        'dist/src/index.js',
        'dist/src/index.d.ts',
        'dist/src/guards/index.js',
        'dist/src/guards/index.d.ts',
        'dist/src/cli/main.js',
        'dist/src/agent/openapi.json', // the agent serves it at /openapi.json
      ]),
    );
    expect(
      shipped.filter(
        (f) =>
          !/^(dist\/src\/.*\.(js|d\.ts|js\.map)|dist\/src\/agent\/openapi\.json|crds\/.*\.yaml|package\.json|README\.md|LICENSE)$/.test(
            f,
          ),
      ),
    ).toEqual([]);
  });

  it('ships source maps that resolve: each names its file and carries the source of every entry', () => {
    const maps = shipped.filter((f) => f.endsWith('.js.map'));
    expect(maps.length).toBeGreaterThan(0);
    for (const m of maps) {
      const map = JSON.parse(readFileSync(installed(m), 'utf8')) as {
        file: string;
        sources: string[];
        sourcesContent?: (string | null)[];
      };
      expect(existsSync(join(dirname(installed(m)), map.file)), m).toBe(true);
      expect(map.sourcesContent?.length, m).toBe(map.sources.length);
      expect(
        map.sourcesContent?.every((c) => typeof c === 'string' && c.length > 0),
        m,
      ).toBe(true);
    }
  });

  it("passes a consumer's own test (node --test) that imports acquire and the guards", async () => {
    writeFileSync(
      join(consumer, 'fence.test.js'),
      [
        "import { test } from 'node:test';",
        "import assert from 'node:assert/strict';",
        "import { acquire, NotAcquiredError } from 'fencepost';",
        "import { FenceBook, parseToken, redisGuard } from 'fencepost/guards';",
        "test('the guard refuses a stale token and lets the holder write again', () => {",
        '  const book = new FenceBook();',
        "  assert.equal(book.commit('ledger', parseToken('215')), true);",
        "  assert.deepEqual(book.check('ledger', '214'), { ok: false, status: 409, reason: 'stale fencing token 214 < 215', highWater: 215n });",
        "  assert.deepEqual(book.check('ledger', '215'), { ok: true, token: 215n });",
        "  assert.equal(typeof redisGuard, 'function');",
        '});',
        "test('acquire outside a pod names the missing downward-API variable', async () => {",
        "  assert.equal(typeof NotAcquiredError, 'function');",
        '  const env = { ...process.env };',
        "  delete process.env['POD_NAMESPACE'];",
        "  await assert.rejects(acquire('billing'), /POD_NAMESPACE is not set/);",
        '  process.env = env;',
        '});',
        '',
      ].join('\n'),
    );
    const r = await run(process.execPath, ['--test', '--test-reporter=tap', 'fence.test.js'], { cwd: consumer });
    expect(r.stdout).toMatch(/^# pass 2$/m);
    expect(r.stdout).toMatch(/^# fail 0$/m);
    // Installed from the tarball, not linked: a real folder, with its own copy of the build.
    expect(readdirSync(installed('dist/src')).length).toBeGreaterThan(0);
    expect(tarball).toMatch(/fencepost-\d+\.\d+\.\d+\.tgz$/);
  });

  it('points every export, its types condition, "types" and the bin at a file it ships', () => {
    const targets = Object.values(pkg.exports).flatMap((e) => (typeof e === 'string' ? [e] : Object.values(e)));
    const paths = [...targets, pkg.types, ...Object.values(pkg.bin)].map((p) =>
      p.replace(/^\.\//, '').replace('*', 'distributedlocks.fencepost.io.yaml'),
    );
    for (const path of paths) expect(existsSync(installed(path)), path).toBe(true);
    expect(Object.keys(pkg.exports)).toEqual(expect.arrayContaining(['.', './guards']));
    for (const [subpath, e] of Object.entries(pkg.exports)) {
      if (typeof e !== 'string' && e['default']?.endsWith('.js'))
        expect(Object.keys(e)[0], `${subpath}: types must come first`).toBe('types');
    }
  });

  const fenceposts = (t: ModuleTrace): string[] =>
    t.modules
      .filter((m) => m.startsWith('node_modules/fencepost/'))
      .map((m) => m.slice('node_modules/fencepost/'.length));
  const load = (code: string) => traceModules(['--input-type=module', '-e', code], { cwd: consumer });

  it("loads 'fencepost/guards' with no other package: no Kubernetes client, Redis client, logger or metrics", async () => {
    const t = await load(`const g = await import('fencepost/guards'); console.log(Object.keys(g).sort().join(' '))`);
    expect(t.code, t.stderr).toBe(0);
    expect(t.stdout.trim().split(' ')).toEqual(
      expect.arrayContaining([
        'FenceBook',
        'httpGuard',
        'postgresGuard',
        'redisGuard',
        'fencedUpdateSql',
        'TokenError',
        'parseToken',
      ]),
    );
    expect(t.packages).toEqual(['fencepost']);
    expect(
      fenceposts(t).filter((f) => !f.startsWith('dist/src/guards/') && f !== 'dist/src/protocol/token.js'),
    ).toEqual([]);
  });

  it("loads 'fencepost' (acquire and the guards) without a Kubernetes client package, ioredis or prom-client", async () => {
    const t = await load(`const m = await import('fencepost'); console.log(typeof m.acquire, typeof m.redisGuard)`);
    expect(t.code, t.stderr).toBe(0);
    expect(t.stdout.trim()).toBe('function function');
    expect(t.packages).not.toContain('@kubernetes/client-node');
    expect(t.packages).not.toContain('ioredis');
    expect(t.packages).not.toContain('prom-client');
    expect(fenceposts(t).filter((f) => f.startsWith('dist/src/controllers/'))).toEqual([]);
  });

  it('refuses deep imports of what it does not export', async () => {
    const t = await load(
      `try { await import('fencepost/dist/src/client/acquire.js'); } catch (e) { console.log(e.code); }`,
    );
    expect(t.stdout.trim()).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');
  });

  it('runs its bin, loading only the subcommand asked for: the agent loads no Kubernetes client package, no ioredis and no controller', async () => {
    const main = installed(pkg.bin['fencepost'] ?? '');
    const help = await traceModules([main, 'exec', '--help'], { cwd: consumer });
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toContain('Usage: fencepost exec');
    expect(help.packages).toEqual(['fencepost']);
    const agent = await traceModules([main, 'agent', '--lock', 'billing'], { cwd: consumer }); // no POD_NAME: fails after loading
    expect(fenceposts(agent)).toContain('dist/src/cli/agent.js');
    expect(agent.packages).not.toContain('@kubernetes/client-node');
    expect(agent.packages).not.toContain('ioredis');
    expect(
      fenceposts(agent).filter((f) => f.startsWith('dist/src/controllers/') || f === 'dist/src/cli/controller.js'),
    ).toEqual([]);
  });

  it('ships the kubectl plugin as the bin kubectl-fencepost, whose --help loads no Kubernetes client', async () => {
    const plugin = installed(pkg.bin['kubectl-fencepost'] ?? '');
    const help = await traceModules([plugin, '--help'], { cwd: consumer });
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toContain('Usage: kubectl fencepost <command>');
    expect(help.packages).toEqual(['fencepost']);
    const status = await traceModules([plugin, 'status', '--help'], { cwd: consumer });
    expect(status.stdout).toContain('Usage: kubectl fencepost status [LOCK] [-n NS | -A]');
    expect(status.packages).toEqual(['fencepost']);
  });

  it('type-checks a consumer of fencepost/guards against the shipped declarations alone (no Kubernetes types)', async () => {
    writeFileSync(
      join(consumer, 'guards-user.ts'),
      [
        "import { FenceBook, postgresGuard, redisGuard, TokenError, type PostgresQueryable, type RedisGuard } from 'fencepost/guards';",
        'const book = new FenceBook();',
        "const mark: bigint | undefined = book.snapshot().get('orders');",
        '// @ts-expect-error: a token is a bigint or a decimal string, never a number',
        "book.check('orders', 5);",
        "export const guard = (db: PostgresQueryable) => postgresGuard(db, { table: 'orders', idColumn: 'id', fenceColumn: 'fence', setColumns: ['total'] });",
        'export { mark, redisGuard, TokenError };',
        'export type { RedisGuard };',
      ].join('\n'),
    );
    // skipLibCheck: installed from the registry, ioredis's own declarations import 'redis-errors',
    // which has no types; the point here is which declarations load (--listFiles), not ioredis's.
    writeFileSync(join(consumer, 'tsconfig.guards.json'), consumerTsconfig('guards-user.ts', true));
    const r = await run(process.execPath, [tsc, '-p', 'tsconfig.guards.json', '--listFiles'], { cwd: consumer });
    const files = r.stdout.split('\n');
    expect(files).toContain(installed('dist/src/guards/index.d.ts'));
    expect(files.filter((f) => f.includes('@kubernetes/client-node'))).toEqual([]);
  });

  it("type-checks a consumer of 'fencepost' (acquire, HeldLock) against the shipped declarations", async () => {
    writeFileSync(
      join(consumer, 'lock-user.ts'),
      [
        "import { acquire, NotAcquiredError, redisGuard, type HeldLock, type LockState } from 'fencepost';",
        'export async function once(): Promise<bigint> {',
        "  await using lock: HeldLock = await acquire('daily-totals', { waitMs: 1000 });",
        '  // @ts-expect-error: the fencing token is a bigint',
        '  const n: number = lock.token;',
        '  return lock.token + BigInt(n);',
        '}',
        "export const state: LockState = 'held';",
        'export { NotAcquiredError, redisGuard };',
      ].join('\n'),
    );
    // skipLibCheck: @kubernetes/client-node's own declarations need @types/ws, which a consumer may lack.
    writeFileSync(join(consumer, 'tsconfig.lock.json'), consumerTsconfig('lock-user.ts', true));
    const r = await run(process.execPath, [tsc, '-p', 'tsconfig.lock.json', '--listFiles'], { cwd: consumer });
    expect(r.stdout.split('\n')).toContain(installed('dist/src/index.d.ts'));
  });
});
