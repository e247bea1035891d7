/**
 * `fencepost dashboard` in a real browser (Debian's chromium, driven by playwright-core) against
 * the shared API server, with the lock controller running in-process: the page shows a lock
 * within a second of its grant, with its holder and token, and its countdown moves; the filters
 * by namespace and state work; the list is windowed (only a screenful of rows in the DOM, with
 * aria-rowcount/aria-rowindex for the whole), yet scrolling and Tab reach every lock; the keyboard
 * reaches a lock's link and its page (holder pod, Events, Lease, timeline); a phone-width viewport
 * needs no sideways scrolling; the CSP holds (no violation), and the server answers only GET/HEAD
 * and only to loopback names.
 *
 * FENCEPOST_SCREENSHOTS=docs/images writes the README's screenshots (dashboard.png,
 * dashboard-lock.png); otherwise they go to a temporary folder that is removed.
 */
import { request } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION } from '../../../src/api/v1alpha1/distributedlock.ts';
import type { Snapshot } from '../../../src/dashboard/wire.ts';
import { startDashboard, type Dashboard } from '../../../src/dashboard/start.ts';
import { CONTENT_SECURITY_POLICY } from '../../../src/dashboard/headers.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import { launchBrowser } from '../../support/browser.ts';
import { eventually, freshNamespace, sharedKubeConfig } from '../../support/env.ts';
import {
  createLock,
  createPod,
  getLease,
  lockBody,
  serviceAccountKubeConfig,
  testKube,
  type TestKube,
} from '../../support/fixtures.ts';
import { useLockController } from '../../support/lock-controller.ts';

const LEASE = { fencing: { backend: 'Lease' as const } };

/** Attributes: the part of a DOM element the in-page predicates read (the tests type-check without the DOM library). */
interface Attributes {
  getAttribute(name: string): string | null;
}

/** raw sends one request with the given method and Host header (fetch would not let a test set Host). */
function raw(port: number, method: string, path: string, host = `127.0.0.1:${port}`): Promise<number> {
  return new Promise((res, rej) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers: { host } }, (r) => {
      r.resume();
      res(r.statusCode ?? 0);
    });
    req.on('error', rej);
    req.end();
  });
}

describe('fencepost dashboard in chromium', () => {
  const fx = useLockController('dash-', null);
  let t: TestKube;
  let other: TestKube;
  let dashboard: Dashboard;
  let browser: Browser;
  let page: Page;
  const cspViolations: string[] = [];
  const shotsEnv = process.env.FENCEPOST_SCREENSHOTS;
  const shots = shotsEnv !== undefined && shotsEnv !== '' ? resolve(shotsEnv) : mkdtempSync(join(tmpdir(), 'dash-'));

  beforeAll(async () => {
    t = fx.t;
    const kc = sharedKubeConfig();
    other = testKube(kc, await freshNamespace(kc, 'dash-other-'));
    // Every namespace, as a user would run it: the other test files' locks show up too.
    dashboard = await startDashboard({
      kc,
      namespace: undefined,
      host: '127.0.0.1',
      port: 0,
      clock: realClock,
      log: silentLogger,
    });
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.on('console', (m) => {
      if (m.type() === 'error') cspViolations.push(m.text());
    });
    // Filtered to this file's namespace from the start: the list renders only a screenful of rows,
    // and the other files' locks on the shared API server could push this file's below it.
    await page.goto(`${dashboard.url}?namespace=${t.namespace}`);
    await page.waitForSelector('#conn.ok');
  });
  afterAll(async () => {
    await browser?.close();
    await dashboard?.stop();
    if (shotsEnv === undefined || shotsEnv === '') rmSync(shots, { recursive: true, force: true });
  });

  const row = (ns: string, name: string) => `tr[data-key="${ns}/${name}"]`;

  it('shows a lock within a second of its grant, with holder and token, and its countdown moves', async () => {
    await createPod(t, 'web-0', { app: 'web' });
    // In-page: the browser's clock when the row first shows the lock held.
    // A function, not a string: the page's CSP (no 'unsafe-eval') refuses string predicates.
    const shown = page.waitForFunction(
      (selector: string) => {
        const doc = (globalThis as unknown as { document: { querySelector(s: string): Attributes | null } }).document;
        return doc.querySelector(selector)?.getAttribute('data-state') === 'Held' ? Date.now() : false;
      },
      row(t.namespace, 'alpha'),
      { polling: 'raf', timeout: 30_000 },
    );
    await createLock(t, lockBody('alpha', 'web', { leaseDurationSeconds: 600, ...LEASE }));
    const shownAt = Number(await (await shown).jsonValue());
    const lease = await eventually(async () => {
      const l = await getLease(t, 'alpha');
      expect(l?.spec?.holderIdentity).toBeDefined();
      return l;
    });
    const grantedAt = new Date(lease?.spec?.acquireTime ?? 0).getTime();
    const lagMs = shownAt - grantedAt;
    console.log(`dashboard: grant shown ${lagMs} ms after the Lease's acquireTime`);
    expect(lagMs).toBeLessThan(1000);

    const tr = page.locator(row(t.namespace, 'alpha'));
    await expect.poll(() => tr.locator('td.holder').textContent()).toBe('web-0');
    const token = lease?.metadata?.annotations?.['fencepost.io/fencing-token'];
    expect(token).toMatch(/^\d+$/);
    expect(await tr.locator('td.token').textContent()).toBe(token);
    // The LeaseGranted Event comes on its own watch, possibly a flush after the Lease's change.
    await expect.poll(() => tr.locator('td.recent').textContent()).toContain('LeaseGranted');

    const first = await tr.locator('td.expires').textContent();
    expect(first).toMatch(/^(9m5\d|10m00)s$/);
    await page.waitForTimeout(1500);
    const later = await tr.locator('td.expires').textContent();
    expect(later).not.toBe(first);
  });

  it('filters by namespace and by state', async () => {
    await createLock(t, lockBody('gamma', 'nobody', LEASE)); // no candidate: stays Free
    await createLock(other, lockBody('beta', 'web', LEASE)); // no controller there: stays Free
    // beta is filtered out (its namespace is not selected), so not rendered: wait for its namespace's option.
    await page.waitForSelector(`#f-namespace option[value="${other.namespace}"]`, { state: 'attached' });
    await page.waitForSelector(row(t.namespace, 'gamma'), { state: 'attached' });
    const visible = async (ns: string, name: string) => await page.locator(row(ns, name)).isVisible();

    await page.selectOption('#f-namespace', t.namespace);
    await page.selectOption('#f-state', '');
    expect([await visible(t.namespace, 'alpha'), await visible(t.namespace, 'gamma')]).toEqual([true, true]);
    expect(await visible(other.namespace, 'beta')).toBe(false);
    expect(page.url()).toContain(`namespace=${t.namespace}`);

    await page.selectOption('#f-state', 'Held');
    expect([await visible(t.namespace, 'alpha'), await visible(t.namespace, 'gamma')]).toEqual([true, false]);
    await page.selectOption('#f-state', 'Free');
    expect([await visible(t.namespace, 'alpha'), await visible(t.namespace, 'gamma')]).toEqual([false, true]);

    await page.selectOption('#f-namespace', other.namespace);
    expect([await visible(other.namespace, 'beta'), await visible(t.namespace, 'gamma')]).toEqual([true, false]);
    expect(await page.locator('#count').textContent()).toMatch(/^1 of \d+ locks shown$/);

    await page.selectOption('#f-namespace', t.namespace);
    await page.selectOption('#f-state', '');
    await page.screenshot({ path: join(shots, 'dashboard.png') });
  });

  it("reaches a lock's link by keyboard; its page links the holder pod, its Events and its Lease, with a timeline", async () => {
    await page.focus('#f-text');
    let reached = false;
    for (let i = 0; i < 10 && !reached; i++) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate(
        `document.activeElement?.getAttribute('href') === '/?lock=${encodeURIComponent(`${t.namespace}/alpha`)}'`,
      );
    }
    expect(reached).toBe(true);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#lock-token');
    await expect.poll(() => page.locator('#lock-token').textContent()).toMatch(/^\d+$/);
    expect(await page.locator('#holder-link').textContent()).toBe('web-0');
    const hrefs = await page
      .locator('ul.links a')
      .evaluateAll((as) => as.map((a) => (a as unknown as Attributes).getAttribute('href')));
    expect(hrefs).toEqual([
      `/api/raw/events/${t.namespace}/alpha`,
      `/api/raw/leases/${t.namespace}/dlock-alpha`,
      `/api/raw/pods/${t.namespace}/web-0`,
    ]);
    expect(await page.locator('ol.timeline').textContent()).toContain('LeaseGranted');
    const first = await page.locator('#lock-expires').textContent();
    await page.waitForTimeout(1500);
    expect(await page.locator('#lock-expires').textContent()).not.toBe(first);
    await page.screenshot({ path: join(shots, 'dashboard-lock.png') });

    // The links answer with the objects, read from the API server.
    for (const href of hrefs) {
      const r = await fetch(new URL(href ?? '', dashboard.url));
      expect(r.status, href ?? '').toBe(200);
    }
    const lease = (await (await fetch(new URL(hrefs[1] ?? '', dashboard.url))).json()) as {
      spec: { holderIdentity: string };
    };
    expect(lease.spec.holderIdentity).toMatch(/^web-0\//);
  });

  it('keeps a screenful of rows in the DOM; scrolling, Tab and the filters still reach every lock', async () => {
    const many = testKube(sharedKubeConfig(), await freshNamespace(sharedKubeConfig(), 'dash-many-'));
    const N = 150;
    const names = Array.from({ length: N }, (_, i) => `lock-${String(i).padStart(3, '0')}`);
    for (let i = 0; i < N; i += 15)
      await Promise.all(names.slice(i, i + 15).map((n) => createLock(many, lockBody(n, 'nobody', LEASE))));
    const tab = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    try {
      await tab.goto(`${dashboard.url}?namespace=${many.namespace}`);
      await expect.poll(() => tab.locator('#count').textContent()).toMatch(new RegExp(`^${N} of \\d+ locks shown$`));
      const rendered = () => tab.locator('#lock-rows tr[data-key]');
      const keyOf = (name: string) => `${many.namespace}/${name}`;
      const focused = () =>
        tab.evaluate<{ href: string | null; index: string | null }>(
          `({ href: document.activeElement?.getAttribute('href') ?? null,
              index: document.activeElement?.closest('tr')?.getAttribute('aria-rowindex') ?? null })`,
        );

      // A screenful (800 px: about 17 rows) and the overscan, not 150; the table tells its real size.
      const atTop = await rendered().count();
      expect(atTop).toBeGreaterThan(10);
      expect(atTop).toBeLessThan(50);
      expect(await tab.locator('#locks').getAttribute('aria-rowcount')).toBe(String(N + 1));
      expect(await tab.locator(row(many.namespace, 'lock-000')).getAttribute('aria-rowindex')).toBe('2');

      // Scrolled to the bottom: the last lock is rendered, in its place, and still only a screenful.
      await tab.evaluate('window.scrollTo(0, document.documentElement.scrollHeight)');
      const lastRow = tab.locator(row(many.namespace, 'lock-149'));
      await lastRow.waitFor();
      expect(await lastRow.getAttribute('aria-rowindex')).toBe(String(N + 1));
      expect(await tab.locator(row(many.namespace, 'lock-000')).count()).toBe(0);
      expect(await rendered().count()).toBeLessThan(50);

      // Tab walks the links row by row past the first window, and Shift+Tab walks back.
      await tab.evaluate('window.scrollTo(0, 0)');
      await tab.locator(row(many.namespace, 'lock-000')).waitFor();
      await tab.focus('#f-text');
      for (let i = 0; i < 60; i++) await tab.keyboard.press('Tab');
      expect(await focused()).toEqual({ href: `/?lock=${encodeURIComponent(keyOf('lock-059'))}`, index: '61' });
      for (let i = 0; i < 55; i++) await tab.keyboard.press('Shift+Tab');
      expect(await focused()).toEqual({ href: `/?lock=${encodeURIComponent(keyOf('lock-004'))}`, index: '6' });
      expect(await rendered().count()).toBeLessThan(50);

      // The text filter searches every lock, rendered or not.
      await tab.fill('#f-text', 'lock-14');
      await expect.poll(() => tab.locator('#count').textContent()).toMatch(/^10 of \d+ locks shown$/);
      expect(
        await rendered().evaluateAll((trs) => trs.map((tr) => (tr as unknown as Attributes).getAttribute('data-key'))),
      ).toEqual(names.slice(140).map(keyOf));
      expect(await tab.locator('#locks').getAttribute('aria-rowcount')).toBe('11');
    } finally {
      await tab.close();
      await many.custom.deleteCollectionNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: many.namespace,
        plural: PLURAL,
      });
    }
  });

  it('renders at phone width without horizontal scrolling', async () => {
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, isMobile: true });
    try {
      await phone.goto(`${dashboard.url}?namespace=${t.namespace}`);
      await phone.waitForSelector(row(t.namespace, 'alpha'));
      const [scroll, client] = await phone.evaluate<[number, number]>(
        '[document.documentElement.scrollWidth, document.documentElement.clientWidth]',
      );
      expect(scroll).toBeLessThanOrEqual(client);
      await phone.goto(`${dashboard.url}?lock=${encodeURIComponent(`${t.namespace}/alpha`)}`);
      await phone.waitForSelector('#lock-token');
      const [s2, c2] = await phone.evaluate<[number, number]>(
        '[document.documentElement.scrollWidth, document.documentElement.clientWidth]',
      );
      expect(s2).toBeLessThanOrEqual(c2);
    } finally {
      await phone.close();
    }
  });

  it('works with a read-only ServiceAccount: get, list and watch, nothing else', async () => {
    const kc = sharedKubeConfig();
    await t.core.createNamespacedServiceAccount({ namespace: t.namespace, body: { metadata: { name: 'viewer' } } });
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: t.namespace,
      body: {
        metadata: { name: 'dashboard-viewer' },
        rules: [
          { apiGroups: ['fencepost.io'], resources: ['distributedlocks'], verbs: ['get', 'list', 'watch'] },
          { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch'] },
          { apiGroups: [''], resources: ['events', 'pods'], verbs: ['get', 'list', 'watch'] },
        ],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: t.namespace,
      body: {
        metadata: { name: 'dashboard-viewer' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'dashboard-viewer' },
        subjects: [{ kind: 'ServiceAccount', name: 'viewer', namespace: t.namespace }],
      },
    });
    const viewer = await serviceAccountKubeConfig(kc, t.namespace, 'viewer');
    const d = await eventually(
      () =>
        startDashboard({
          kc: viewer,
          namespace: t.namespace,
          host: '127.0.0.1',
          port: 0,
          clock: realClock,
          log: silentLogger,
          syncTimeoutMs: 5_000,
        }),
      30_000,
      500,
    );
    try {
      const alpha = await eventually(async () => {
        const snap = (await (await fetch(new URL('/api/locks', d.url))).json()) as Snapshot;
        const v = snap.locks.find((l) => l.name === 'alpha');
        expect(v?.holder).toBe('web-0');
        expect(snap.synced).toBe(true);
        return v;
      });
      expect(alpha?.recent.map((e) => e.kind)).toContain('LeaseGranted');
    } finally {
      await d.stop();
    }
  });

  it('serves a strict CSP with no violation, answers GET and HEAD only, and only to loopback names', async () => {
    const r = await fetch(dashboard.url);
    expect(r.headers.get('content-security-policy')).toBe(CONTENT_SECURITY_POLICY);
    expect(CONTENT_SECURITY_POLICY).toContain("default-src 'none'");
    expect(cspViolations).toEqual([]);
    expect(await raw(dashboard.port, 'HEAD', '/')).toBe(200);
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE'])
      expect(await raw(dashboard.port, method, '/api/locks'), method).toBe(405);
    expect(await raw(dashboard.port, 'GET', '/', `localhost:${dashboard.port}`)).toBe(200);
    expect(await raw(dashboard.port, 'GET', '/', `attacker.example:${dashboard.port}`)).toBe(421);
    expect(await raw(dashboard.port, 'GET', '/nowhere')).toBe(404);
  });
});
