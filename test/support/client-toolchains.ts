/**
 * The language toolchains the client tests build with (test/integration/clients/): where each
 * client lives, a check that its toolchain is there — nothing is skipped silently — and Maven run
 * as the Java tests run it. Shared by each client's agent test and its store test.
 */
import { execFile, spawnSync } from 'node:child_process';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

/** GO_MODULE is clients/go. */
export const GO_MODULE = resolve(import.meta.dirname, '../../clients/go');
/** JAVA_PROJECT is clients/java. */
export const JAVA_PROJECT = resolve(import.meta.dirname, '../../clients/java');
/** M2 is the Maven repository the tests and hack/test-clients.sh share. */
const M2 = join(process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'fencepost', 'm2');

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
