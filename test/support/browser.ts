/**
 * A real browser for tests and benchmarks: Debian's `chromium` (hack/prereqs.sh installs it as
 * the `chromium` component), driven by playwright-core through `executablePath` — playwright-core
 * downloads no browser of its own. `CHROMIUM=/path` names another Chromium build.
 *
 * The browser is a child process of playwright's; `browser.close()` ends it (and its renderer and
 * GPU processes) — call it in afterAll.
 */
import { execFileSync } from 'node:child_process';
import { chromium, type Browser } from 'playwright-core';

/** chromiumPath finds the browser: $CHROMIUM, else `chromium` on PATH; throws naming the fix. */
export function chromiumPath(): string {
  const fromEnv = process.env.CHROMIUM;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  try {
    return execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error(
      'no chromium on PATH: run hack/prereqs.sh chromium (Debian: apt-get install chromium), or set CHROMIUM',
    );
  }
}

/**
 * launchBrowser starts headless Chromium. Playwright passes --no-sandbox (its chromiumSandbox
 * default), which Chromium needs when it runs as root, as CI does here.
 */
export async function launchBrowser(extraArgs: readonly string[] = []): Promise<Browser> {
  return await chromium.launch({ executablePath: chromiumPath(), headless: true, args: [...extraArgs] });
}
