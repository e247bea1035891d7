/**
 * hack/prereqs.sh, the precondition check that hack/npm and .ci/run run before anything else:
 * on a machine where the server programs are missing and cannot be installed, `hack/npm test`
 * and `hack/npm run demo` say in one line what to install and stop at once — no Node download,
 * no npm ci, no control plane build.
 *
 * "Missing" is a real PATH without them: a folder of links to every program on this machine's
 * PATH except redis-server, openssl, faketime, go and apt-get (nothing is uninstalled). "Cannot
 * install" is either that PATH (no apt-get) or a real non-root user (nobody, through setpriv).
 */
import { spawn } from 'node:child_process';
import {
  accessSync,
  chmodSync,
  constants,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../../..');
const SERVERS = ['redis-server', 'openssl', 'faketime', 'go'];
/** HANG_BOUND_MS only catches a hang or a build that started; the check itself takes milliseconds. */
const HANG_BOUND_MS = 15_000;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/**
 * run starts command in its own process group and kills the whole group at HANG_BOUND_MS, so
 * that a broken check cannot leave a build or a test run behind.
 */
function run(command: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((done, fail) => {
    const started = performance.now();
    const child = spawn(command, args, { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => {
      stdout += b.toString();
    });
    child.stderr.on('data', (b: Buffer) => {
      stderr += b.toString();
    });
    const timer = setTimeout(() => {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, HANG_BOUND_MS);
    child.on('error', fail);
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr, ms: performance.now() - started });
    });
  });
}

/** pathWithout returns a folder of links to the programs on PATH, leaving out the ones named. */
function pathWithout(dir: string, leaveOut: readonly string[]): string {
  mkdirSync(dir);
  for (const from of (process.env['PATH'] ?? '').split(delimiter)) {
    let names: string[];
    try {
      names = readdirSync(from);
    } catch {
      continue;
    }
    for (const name of names) {
      if (leaveOut.includes(name)) continue;
      try {
        symlinkSync(join(from, name), join(dir, name));
      } catch {
        /* an earlier PATH entry has it */
      }
    }
  }
  return dir;
}

/** onPath is true when name is an executable in a folder on PATH. */
const onPath = (name: string): boolean =>
  (process.env['PATH'] ?? '').split(delimiter).some((d) => {
    try {
      accessSync(join(d, name), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
const asRoot = process.getuid?.() === 0;

describe('hack/prereqs.sh: the one-line precondition check', () => {
  let dir: string;
  let bare: string; // no server programs, no apt-get
  let noServers: string; // no server programs, apt-get there
  let cache: string; // FENCEPOST_CACHE: stays empty unless something was fetched or built
  let env: NodeJS.ProcessEnv;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'fencepost-prereqs-'));
    chmodSync(dir, 0o755);
    bare = pathWithout(join(dir, 'bare'), [...SERVERS, 'apt-get']);
    noServers = pathWithout(join(dir, 'no-servers'), SERVERS);
    cache = join(dir, 'cache');
    mkdirSync(cache);
    const { KUBEBUILDER_ASSETS: _assets, REDIS_SERVER: _redis, ...rest } = process.env;
    env = { ...rest, PATH: bare, FENCEPOST_CACHE: cache };
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  /** expectOneLineRefusal checks a run that refused: exit 1, one line naming every missing program, nothing built. */
  const expectOneLineRefusal = (r: Run, how: RegExp): void => {
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const lines = r.stderr.split('\n').filter((l) => l !== '');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^fencepost: missing redis-server, openssl, faketime, go >= 1\.21; install with: /);
    expect(lines[0]).toMatch(how);
    expect(r.stderr).not.toMatch(/\[build\]|\[bootstrap\]|at .*\.ts:\d+/); // no build, no Node fetch, no stack trace
    expect(readdirSync(cache)).toEqual([]);
  };

  // The tests run Go themselves (clients/go), so `test` needs Go whatever KUBEBUILDER_ASSETS holds.
  it.each([
    ['hack/npm test', ['test'], /Go >= 1\.21 from https:\/\/go\.dev\/dl on PATH \(the tests of clients\/go run it\)$/],
    ['hack/npm run demo', ['run', 'demo'], /Go >= 1\.21 .* or KUBEBUILDER_ASSETS/],
  ])(
    '%s on a PATH without the server programs and without apt-get says what to install in one line, before any build',
    async (_name, args, go) => {
      const r = await run(join(ROOT, 'hack/npm'), args, env);
      expectOneLineRefusal(
        r,
        /your package manager \(Debian's packages: redis-server openssl faketime\) or put them on PATH; Go >= 1\.21/,
      );
      expect(r.stderr.trim()).toMatch(go);
      process.stdout.write(`${args.join(' ')}: refused in ${Math.round(r.ms)} ms\n`);
    },
  );

  it.runIf(asRoot && onPath('setpriv'))(
    'as a user who is not root, with apt-get on PATH, names the apt-get command with sudo',
    async () => {
      const r = await run(
        'setpriv',
        ['--reuid=nobody', '--regid=nogroup', '--clear-groups', join(ROOT, 'hack/prereqs.sh')],
        { ...env, PATH: noServers },
      );
      expectOneLineRefusal(
        r,
        /sudo apt-get install --no-install-recommends redis-server openssl faketime \(or put them on PATH\)/,
      );
    },
  );

  it('takes the redis-server named by REDIS_SERVER, and needs no Go when KUBEBUILDER_ASSETS has the binaries', async () => {
    const assets = join(dir, 'assets');
    mkdirSync(assets);
    // Only the names matter to the check: the testbed runs whatever KUBEBUILDER_ASSETS holds.
    for (const c of ['kube-apiserver', 'etcd', 'kubectl']) copyFileSync('/bin/true', join(assets, c));
    const redis = join(dir, 'my-redis-server');
    copyFileSync('/bin/true', redis);
    const r = await run(join(ROOT, 'hack/prereqs.sh'), ['kube-apiserver', 'etcd', 'kubectl'], {
      ...env,
      REDIS_SERVER: redis,
      KUBEBUILDER_ASSETS: assets,
    });
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toMatch(
      /^fencepost: missing openssl, faketime; install with: your package manager \(Debian's packages: openssl faketime\) or put them on PATH$/,
    );
  });

  // The tests of clients/java run a JDK and Maven: `java` names them, with Debian's packages.
  it.runIf(['redis-server', 'openssl', 'faketime'].every(onPath))(
    'with the java component, on a PATH without java, javac and mvn, names a JDK >= 17 and Maven in one line',
    async () => {
      const noJava = pathWithout(join(dir, 'no-java'), ['java', 'javac', 'mvn', 'apt-get']);
      const assets = join(dir, 'java-assets');
      mkdirSync(assets);
      copyFileSync('/bin/true', join(assets, 'kube-apiserver'));
      const r = await run(join(ROOT, 'hack/prereqs.sh'), ['kube-apiserver', 'java'], {
        ...env,
        PATH: noJava,
        KUBEBUILDER_ASSETS: assets,
      });
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe(
        "fencepost: missing a JDK >= 17 and Maven; install with: your package manager (Debian's packages: default-jdk-headless maven) or put them on PATH",
      );
    },
  );

  // Where the programs are installed (CI after hack/prereqs.sh, a prepared laptop).
  it.runIf(['redis-server', 'openssl', 'faketime'].every(onPath))(
    'passes silently where everything is there (a redis-only caller)',
    async () => {
      const { KUBEBUILDER_ASSETS: _assets, REDIS_SERVER: _redis, ...rest } = process.env;
      const r = await run(join(ROOT, 'hack/prereqs.sh'), ['--no-control-plane'], rest);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    },
  );
});
