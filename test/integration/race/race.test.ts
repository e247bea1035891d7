/**
 * The race page (`npm run demo -- --web`) in a real browser (Debian's chromium, driven by
 * playwright-core), on the demo's own real testbed: a control plane, redis-server, the
 * controller, two agents and their workers, all started by the demo process this test starts.
 *
 * - With the guard, "Freeze the holder" stops the holder's worker and agent (SIGSTOP) between its
 *   check and its write; the lease runs out, the other pod is granted a larger token, and on
 *   SIGCONT the stale write is refused — on screen, and in Redis: the test reads the key every
 *   few milliseconds from the freeze on and never sees the stale value.
 * - Without the guard, the same freeze's stale write overwrites: the same reading of Redis sees
 *   the stale value (which shows that the reading would have caught it above).
 * - The language chosen in the code panel (by mouse or arrow keys) survives a reload, and Copy
 *   puts the snippet on the clipboard.
 * - Phone width needs no sideways scrolling; the CSP is the dashboard's and is never violated;
 *   actions are refused from another origin, without JSON, and under a non-loopback Host.
 *
 * FENCEPOST_SCREENSHOTS=docs/images writes race.png and race-phone.png; otherwise they go to a
 * temporary folder that is removed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTENT_SECURITY_POLICY } from '../../../src/dashboard/headers.ts';
import type { Hello, RaceEvent } from '../../../hack/race/events.ts';
import { SNIPPETS } from '../../../hack/race/page/snippets.ts';
import { launchBrowser } from '../../support/browser.ts';

const root = resolve(import.meta.dirname, '../../..');
const PAUSE_SECONDS = 4; // twice the demo's 2 s lease: enough for the expiry and the new grant

/** startDemo runs `node hack/demo.ts --web` and resolves with its page's URL once it prints it. */
function startDemo(): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const child = spawn(
    process.execPath,
    [resolve(root, 'hack/demo.ts'), '--web', '--address', '127.0.0.1:0', '--pause', String(PAUSE_SECONDS)],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } },
  );
  let out = '';
  const output = (): string => out;
  return new Promise((done, fail) => {
    const timer = setTimeout(() => {
      fail(new Error(`the demo printed no page URL in 150 s:\n${out}`));
    }, 150_000);
    const onData = (c: string): void => {
      out += c;
      const m = /Race page: (http:\/\/\S+)/.exec(out);
      if (m?.[1] !== undefined) {
        clearTimeout(timer);
        done({ child, url: m[1], output });
      }
    };
    child.stdout?.setEncoding('utf8').on('data', onData);
    child.stderr?.setEncoding('utf8').on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`the demo exited (${code}) before serving the page:\n${out}`));
    });
  });
}

/** stopDemo sends SIGTERM (the demo tears its testbed down), then SIGKILL after 30 s. */
async function stopDemo(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  child.kill('SIGTERM');
  const kill = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await exited;
  clearTimeout(kill);
}

/** send makes one request with the given headers (fetch would not let a test set Host or Origin). */
function send(url: string, method: string, path: string, headers: Record<string, string>): Promise<number> {
  const u = new URL(url);
  return new Promise((done, fail) => {
    const req = request({ host: u.hostname, port: u.port, method, path, headers }, (r) => {
      r.resume();
      done(r.statusCode ?? 0);
    });
    req.on('error', fail);
    req.end(method === 'POST' ? '{}' : undefined);
  });
}

/**
 * watchKey reads `key` from Redis in a loop until stop() and returns every distinct value seen, in
 * order. Loopback GETs take well under a millisecond, so a value that stays for the 200 ms between
 * two writes of the other worker is seen.
 */
function watchKey(redis: Redis, key: string): { stop: () => Promise<(string | null)[]> } {
  const seen: (string | null)[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const v = await redis.get(key);
      if (seen.at(-1) !== v) seen.push(v);
      await sleep(2);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return seen;
    },
  };
}

describe('the race page in chromium', () => {
  let demo: { child: ChildProcess; url: string; output: () => string };
  let hello: Hello;
  let redis: Redis;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const consoleErrors: string[] = [];
  const shotsEnv = process.env.FENCEPOST_SCREENSHOTS;
  const shots = shotsEnv !== undefined && shotsEnv !== '' ? resolve(shotsEnv) : mkdtempSync(join(tmpdir(), 'race-'));

  const state = async (): Promise<Hello> => (await (await fetch(new URL('/api/state', demo.url))).json()) as Hello;

  /** freeze presses the button once the holder writes, and returns the refusal or overwrite that follows. */
  async function freezeAndWait(outcome: 'refused' | 'overwrote'): Promise<{
    frozen: Extract<RaceEvent, { type: 'frozen' }>;
    stale: Extract<RaceEvent, { type: 'refused' | 'overwrote' }>;
    /** newer: the value the new holder wrote; after: what Redis held from its first sighting on. */
    newer: string;
    after: (string | null)[];
  }> {
    await page.locator('#freeze:enabled').waitFor({ timeout: 30_000 });
    const watch = watchKey(redis, hello.info.key);
    await page.click('#freeze');
    await page
      .locator(`#timeline li.${outcome === 'refused' ? 'good' : 'bad'}`)
      .last()
      .waitFor({ timeout: 30_000 });
    await sleep(300); // the other worker writes again within 200 ms: let the reading see that too
    const values = await watch.stop();
    const events = (await state()).events;
    const frozen = events.findLast((e) => e.type === 'frozen');
    const stale = events.findLast((e) => e.type === outcome);
    const grant = events.findLast((e) => e.type === 'grant');
    if (
      frozen?.type !== 'frozen' ||
      (stale?.type !== 'refused' && stale?.type !== 'overwrote') ||
      grant?.type !== 'grant' ||
      grant.pod === frozen.pod
    )
      throw new Error(`no freeze, new grant or stale write in the events:\n${JSON.stringify(events, null, 1)}`);
    // Before the new holder's first write, the key rightly holds the frozen pod's last good write.
    const newer = `written by ${grant.pod} with token ${grant.token}`;
    const first = values.indexOf(newer);
    if (first < 0) throw new Error(`Redis never held ${JSON.stringify(newer)}: ${JSON.stringify(values)}`);
    return { frozen, stale, newer, after: values.slice(first) };
  }

  beforeAll(async () => {
    demo = await startDemo();
    hello = await state();
    redis = new Redis(hello.info.redisUrl, { maxRetriesPerRequest: 1 });
    browser = await launchBrowser();
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(demo.url).origin });
    page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    await page.goto(demo.url);
    await page.waitForSelector('#conn.ok');
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    redis?.disconnect();
    if (demo !== undefined) await stopDemo(demo.child);
    if (shotsEnv === undefined || shotsEnv === '') rmSync(shots, { recursive: true, force: true });
  }, 60_000);

  it(
    'freezes the holder; its stale write is refused by the guard, on screen and in Redis',
    { timeout: 90_000 },
    async () => {
      expect(await page.inputValue('#pause')).toBe(String(PAUSE_SECONDS));
      expect(await page.isChecked('#guard')).toBe(true);
      await page.click('#race');
      const { frozen, stale, newer, after } = await freezeAndWait('refused');
      if (stale.type !== 'refused') throw new Error('unreachable');
      expect(stale.pod).toBe(frozen.pod);
      expect(stale.token).toBe(frozen.token);
      expect(BigInt(stale.highWater)).toBeGreaterThan(BigInt(stale.token));

      // On screen: the timeline tells the story in order, the cards say who won.
      const timeline = await page.locator('#timeline').innerText();
      const order = [
        `SIGSTOP ${frozen.pod}'s worker and agent`,
        `${frozen.pod}'s lease ran out`,
        `with fencing token ${stale.highWater}, larger than ${frozen.pod}'s ${frozen.token}`,
        `SIGCONT ${frozen.pod}`,
        `REFUSED by the Redis guard (stale token ${stale.token} < ${stale.highWater})`,
      ].map((s) => timeline.indexOf(s));
      expect(
        order.every((i) => i >= 0),
        timeline,
      ).toBe(true);
      expect(
        [...order].sort((a, b) => a - b),
        timeline,
      ).toEqual(order);
      expect(await page.locator('#outcome').innerText()).toContain(
        `refused ${frozen.pod}'s stale token ${frozen.token}`,
      );
      expect(await page.locator(`#pod-${frozen.pod}`).getAttribute('data-stale')).toBe('refused');

      // In Redis: once the newer holder had written, the stale value never appeared again; the key
      // holds the newer holder's write, and the lock's mark is the newer token.
      const staleValue = `written by ${frozen.pod} with token ${frozen.token}`;
      expect(newer).toBe(
        `written by ${stale.pod === 'worker-a' ? 'worker-b' : 'worker-a'} with token ${stale.highWater}`,
      );
      expect(after).not.toContain(staleValue);
      const now = await redis.get(hello.info.key);
      expect(now).toMatch(/^written by worker-[ab] with token \d+$/);
      expect(now).not.toBe(staleValue);
      const token = BigInt(/token (\d+)$/.exec(now ?? '')?.[1] ?? '0');
      expect(token).toBeGreaterThanOrEqual(BigInt(stale.highWater));
      expect(BigInt((await redis.get(`fencepost:guard:lock:${hello.info.lock}`)) ?? '0')).toBeGreaterThanOrEqual(token);
      expect(await page.locator('#ledger').innerText()).toMatch(/^"written by worker-[ab] with token \d+"$/);

      await page.locator('#thaw').waitFor({ state: 'hidden' });
      await page.screenshot({ path: join(shots, 'race.png'), fullPage: true });
    },
  );

  it(
    'without the guard, the same freeze lets the stale write overwrite the newer one',
    { timeout: 90_000 },
    async () => {
      await page.click('#guard'); // restarts the workers with plain SETs
      await expect.poll(() => page.isChecked('#guard')).toBe(false);
      await expect
        .poll(async () => (await state()).events.findLast((e) => e.type === 'round'))
        .toMatchObject({ guard: false });
      const { frozen, stale, newer, after } = await freezeAndWait('overwrote');
      expect(stale.pod).toBe(frozen.pod);
      expect(stale.token).toBe(frozen.token);
      if (stale.type !== 'overwrote') throw new Error('unreachable');
      expect(stale.previous).toBe(newer);
      // The same reading of Redis as above sees the stale value come back over the newer one.
      expect(after).toContain(`written by ${frozen.pod} with token ${frozen.token}`);
      expect(await page.locator('#outcome').innerText()).toContain('overwrote the newer write');
      await page.click('#guard'); // back on, for whoever looks next
      await expect
        .poll(async () => (await state()).events.findLast((e) => e.type === 'round'))
        .toMatchObject({ guard: true });
    },
  );

  it('remembers the chosen language across a reload, by mouse and by keyboard, and copies the code', async () => {
    await page.click('#tab-go');
    expect(await page.locator('#code').innerText()).toContain('fencepost.Acquire(ctx, "billing"');
    await page.reload();
    await page.waitForSelector('#conn.ok');
    expect(await page.getAttribute('#tab-go', 'aria-selected')).toBe('true');
    expect(await page.locator('#code').innerText()).toBe(SNIPPETS.go.code);

    await page.focus('#tab-go');
    await page.keyboard.press('ArrowRight');
    expect(await page.evaluate('document.activeElement.id')).toBe('tab-python');
    await page.reload();
    await page.waitForSelector('#conn.ok');
    expect(await page.getAttribute('#tab-python', 'aria-selected')).toBe('true');
    expect(await page.locator('#code').innerText()).toBe(SNIPPETS.python.code);

    await page.click('#copy');
    await expect.poll(() => page.locator('#copied').innerText()).toBe('Copied the Python code.');
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(SNIPPETS.python.code);
    await page.click('#tab-ts'); // the default again, for the screenshots
  });

  it('fits a phone: no sideways scrolling', async () => {
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, isMobile: true });
    try {
      await phone.goto(demo.url);
      await phone.waitForSelector('#conn.ok');
      await phone.waitForSelector('#timeline li');
      const [scroll, client] = await phone.evaluate<[number, number]>(
        '[document.documentElement.scrollWidth, document.documentElement.clientWidth]',
      );
      expect(scroll).toBeLessThanOrEqual(client);
      await phone.screenshot({ path: join(shots, 'race-phone.png'), fullPage: true });
    } finally {
      await phone.close();
    }
  });

  it("serves the dashboard's strict CSP with no violation, and takes actions only from its own page", async () => {
    const r = await fetch(demo.url);
    expect(r.headers.get('content-security-policy')).toBe(CONTENT_SECURITY_POLICY);
    expect(consoleErrors).toEqual([]);
    const host = new URL(demo.url).host;
    const json = { 'content-type': 'application/json', host };
    expect(await send(demo.url, 'POST', '/api/thaw', { ...json, origin: demo.url.replace(/\/$/, '') })).toBe(202);
    expect(await send(demo.url, 'POST', '/api/thaw', { ...json, origin: 'http://attacker.example' })).toBe(403);
    expect(await send(demo.url, 'POST', '/api/thaw', { ...json })).toBe(403);
    expect(
      await send(demo.url, 'POST', '/api/thaw', {
        'content-type': 'text/plain',
        host,
        origin: demo.url.replace(/\/$/, ''),
      }),
    ).toBe(415);
    expect(await send(demo.url, 'GET', '/', { host: 'attacker.example' })).toBe(421);
    expect(await send(demo.url, 'DELETE', '/', { host })).toBe(405);
  });
});
