/**
 * The language toolchains the client tests build with (test/integration/clients/): where each
 * client lives, a check that its toolchain is there — nothing is skipped silently — and Maven run
 * as the Java tests run it. Shared by each client's agent test and its store test.
 */
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { filesKey, filesUnder } from '../../hack/files-key.ts';

/** GO_MODULE is clients/go. */
export const GO_MODULE = resolve(import.meta.dirname, '../../clients/go');
/** JAVA_PROJECT is clients/java. */
export const JAVA_PROJECT = resolve(import.meta.dirname, '../../clients/java');
const CACHE = join(process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'fencepost');
/** M2 is the Maven repository the tests and hack/test-clients.sh share. */
const M2 = join(CACHE, 'm2');

/** requireGo returns `go version`, or throws saying how to get Go: nothing is skipped silently. */
export function requireGo(): string {
  const r = spawnSync('go', ['version'], { encoding: 'utf8' });
  if (r.error !== undefined || r.status !== 0)
    throw new Error(
      'go not found on PATH: the Go client tests build clients/go with Go >= 1.26 (https://go.dev/dl/); install it or put it on PATH',
    );
  return r.stdout.trim();
}

/** requireJava returns `java -version`'s first line, or throws saying how to get a JDK and Maven: nothing is skipped silently. */
export function requireJava(): string {
  const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
  const mvn = spawnSync('mvn', ['-v'], { encoding: 'utf8' });
  if (java.error !== undefined || java.status !== 0 || mvn.error !== undefined || mvn.status !== 0)
    throw new Error(
      'java or mvn not found on PATH: the Java client tests build clients/java with a JDK >= 17 and Maven >= 3.8 (Debian: apt-get install default-jdk-headless maven); install them or put them on PATH',
    );
  return java.stderr.split('\n')[0] ?? '';
}

/** mvn runs Maven in clients/java, offline first: online only when an artifact is missing. */
export async function mvn(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const run = (offline: boolean) =>
    promisify(execFile)('mvn', ['-B', '-q', ...(offline ? ['-o'] : []), `-Dmaven.repo.local=${M2}`, ...args], {
      cwd: JAVA_PROJECT,
      env,
      maxBuffer: 16 << 20,
    });
  try {
    await run(true);
  } catch (e) {
    const out = String((e as { stdout?: string }).stdout ?? '') + String((e as { stderr?: string }).stderr ?? '');
    // Offline, a missing artifact says "in offline mode"; a plugin never downloaded (on a fresh
    // machine, the dependency plugin these tests call by its prefix) says "No plugin found".
    const missing = out.includes('in offline mode') || out.includes('No plugin found for prefix');
    if (!missing) throw new Error(`mvn ${args.join(' ')} failed:\n${out}`, { cause: e });
    await run(false);
  }
}

/** javaSourceKey hashes what a build of clients/java depends on: its pom and every file under src/. */
function javaSourceKey(): string {
  return filesKey(JAVA_PROJECT, ['pom.xml', ...filesUnder(JAVA_PROJECT, 'src')], {}).slice(0, 16);
}

/**
 * javaBuild puts a built clients/java (the jar, its classes and test classes, `mvn package
 * -DskipTests`) into `target` and returns the classpath that runs it with its test dependencies.
 * The build is kept in the fencepost cache by a hash of the sources, as the image archive is, so
 * the files that need it (the agent scenario and the store tests) build it once per change of the
 * sources instead of once per file and run: about 40 s of Maven per CI run. Each caller gets its
 * own copy, where surefire writes its reports.
 */
export async function javaBuild(target: string): Promise<string> {
  const cached = join(CACHE, 'java-build', javaSourceKey());
  if (!existsSync(join(cached, 'classpath'))) {
    // Built beside the cache entry and renamed into place, so that a file running at the same
    // time never finds half a build.
    const work = join(CACHE, 'java-build', `.tmp-${randomBytes(4).toString('hex')}`);
    mkdirSync(work, { recursive: true });
    try {
      await mvn([
        `-Dfencepost.buildDir=${join(work, 'target')}`,
        '-DskipTests',
        'package',
        'dependency:build-classpath',
        '-Dmdep.includeScope=test',
        `-Dmdep.outputFile=${join(work, 'deps')}`,
      ]);
      writeFileSync(join(work, 'classpath'), readFileSync(join(work, 'deps'), 'utf8').trim());
      try {
        renameSync(work, cached);
      } catch (e) {
        // Another file's build got there first: its copy is the same sources' build.
        if (!existsSync(join(cached, 'classpath'))) throw e;
      }
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
  cpSync(join(cached, 'target'), target, { recursive: true });
  return [
    join(target, 'fencepost-client-0.1.0.jar'),
    join(target, 'test-classes'),
    readFileSync(join(cached, 'classpath'), 'utf8'),
  ].join(':');
}
