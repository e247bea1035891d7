/**
 * dashboard.ts — `node bench/dashboard.ts [--locks N] [--seconds S] [--renew-every S] [--handovers-per-second R] [--scroll-every S]`:
 * the dashboard holding N DistributedLocks (default 1,000) with live updates, measured.
 *
 * On a fresh control plane of its own (etcd + kube-apiserver on loopback, CRDs installed):
 *   1. N locks, each with its Lease (`dlock-<lock>`, held by a pod name, a token, a 15 s lease);
 *   2. `fencepost dashboard` as its own process (node src/cli/main.ts), on 127.0.0.1, port 0;
 *   3. Debian's chromium (playwright-core) opens the page at 1280×800 and waits until it counts N
 *      locks (the list is windowed: only a screenful of rows is in the DOM);
 *   4. for `--seconds` (default 60) the benchmark churns: every Lease is renewed once per
 *      `--renew-every` seconds (default 10: N/10 PATCHes per second), and `--handovers-per-second`
 *      times a second (default 5) a lock changes holder — its Lease gets a new holder and token,
 *      its status (holder, token, acquireTime, Held condition) is patched and a LeaseGranted Event
 *      is recorded, as the controller would. Once per 5 s it times one handover of a lock whose row
 *      is rendered until that row shows the new token (the update latency); and every
 *      `--scroll-every` seconds (default 1; 0: never) it scrolls the list to a random place, as a
 *      reader would, so rows keep entering and leaving the DOM;
 *   5. every 2 s: the dashboard process's CPU (utime + stime from /proc, per wall second) and RSS,
 *      and the tab's memory: the renderer processes' RSS (their pids from CDP
 *      SystemInfo.getProcessInfo; RSS and PSS — shared pages divided among their users — from
 *      /proc) and the page's JSHeapUsedSize (CDP
 *      Performance.getMetrics).
 * Prints a summary and writes .results/bench/dashboard.json, with the machine and its load average
 * at start and end. The machine is shared: run it under `flock /tmp/fencepost-heavy.lock`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import type { Page } from 'playwright-core';
import { API_VERSION, GROUP, KIND, PLURAL, VERSION } from '../src/api/v1alpha1/distributedlock.ts';
import type { JsonClient } from '../src/kube/json-client.ts';
import { apiClientFor } from '../src/kube/api-client.ts';
import { LOCK_LABEL, TOKEN_ANNOTATION, leaseName } from '../src/protocol/names.ts';
import { launchBrowser } from '../test/support/browser.ts';
import { startControlPlane } from '../test/support/testbed/control-plane.ts';
import { describeMachine, loadAverage, percentile, runMain, writeResult } from './lib.ts';

const USAGE = `Usage: node bench/dashboard.ts [--locks N] [--seconds S] [--renew-every S] [--handovers-per-second R] [--scroll-every S]\n`;
const MAIN = join(import.meta.dirname, '../src/cli/main.ts');
const SAMPLE_MS = 2000;
const PAGE_SIZE = 4096; // bytes per page for /proc/<pid>/statm
const TICKS = 100; // USER_HZ on Linux

/** Attrs: the part of a DOM element read in the page (the benchmark type-checks without the DOM library). */
interface Attrs {
  getAttribute(name: string): string | null;
}

interface Sample {
  readonly t: number;
  readonly serverCpu: number;
  readonly serverRssMB: number;
  readonly rendererRssMB: number;
  readonly rendererPssMB: number;
  readonly rendererUssMB: number;
  readonly jsHeapMB: number;
}

/**
 * memoryMB reads smaps_rollup: PSS (shared pages divided among their users) and USS (the pages only
 * this process maps: Private_Clean + Private_Dirty, close to Chrome's task manager "memory footprint").
 */
function memoryMB(pid: number): { pss: number; uss: number } {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kB = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);
  return { pss: kB('Pss') / 1024, uss: (kB('Private_Clean') + kB('Private_Dirty')) / 1024 };
}

function procStat(pid: number): { cpuTicks: number; rssMB: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const cpuTicks = Number(fields[11]) + Number(fields[12]); // utime, stime
  const rssPages = Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]);
  return { cpuTicks, rssMB: (rssPages * PAGE_SIZE) / 2 ** 20 };
}

/** pool runs fn over items with at most `n` in flight. */
async function pool<T>(items: readonly T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    }),
  );
}

const now = (): string =>
  new Date()
    .toISOString()
    .replace('Z', '000Z')
    .replace(/\.(\d{3})000Z$/, '.$1000Z');

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      locks: { type: 'string', default: '1000' },
      seconds: { type: 'string', default: '60' },
      'renew-every': { type: 'string', default: '10' },
      'handovers-per-second': { type: 'string', default: '5' },
      'scroll-every': { type: 'string', default: '1' },
      help: { type: 'boolean' },
    },
  });
  if (values.help === true) {
    process.stdout.write(USAGE);
    return;
  }
  const N = Number(values.locks);
  const seconds = Number(values.seconds);
  const renewEvery = Number(values['renew-every']);
  const handoversPerSecond = Number(values['handovers-per-second']);
  const scrollEvery = Number(values['scroll-every']);
  const machine = describeMachine();
  const loadStart = loadAverage();
  const plane = await startControlPlane();
  let dashboard: ChildProcess | undefined;
  let browser: Awaited<ReturnType<typeof launchBrowser>> | undefined;
  try {
    const kc = apiClientFor(plane.kubeconfigPath);
    const json: JsonClient = kc;
    const ns = await plane.createNamespace('dash-bench-');
    const lockPath = `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${PLURAL}`;
    const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`;
    const names = Array.from({ length: N }, (_, i) => `lock-${String(i).padStart(4, '0')}`);
    const tokens = new Map(names.map((n) => [n, 1]));

    // 1. The locks and their Leases.
    let t0 = performance.now();
    await pool(names, 16, async (name) => {
      await json.request({
        method: 'POST',
        path: lockPath,
        body: {
          apiVersion: API_VERSION,
          kind: KIND,
          metadata: { name },
          spec: { leaseDurationSeconds: 15, candidates: { selector: { matchLabels: { app: name } } } },
        },
      });
      await json.request({
        method: 'POST',
        path: leasePath,
        body: {
          metadata: {
            name: leaseName(name),
            labels: { [LOCK_LABEL]: name },
            annotations: { [TOKEN_ANNOTATION]: '1' },
          },
          spec: {
            holderIdentity: `${name}-pod-0/uid-0`,
            leaseDurationSeconds: 15,
            acquireTime: now(),
            renewTime: now(),
            leaseTransitions: 0,
          },
        },
      });
    });
    process.stderr.write(`created ${N} locks and Leases in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);

    // 2. The dashboard, its own process.
    dashboard = spawn(
      process.execPath,
      [MAIN, 'dashboard', '--kubeconfig', plane.kubeconfigPath, '--address', '127.0.0.1:0', '--log-level', 'error'],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const child = dashboard;
    const url = await new Promise<string>((resolve, reject) => {
      const lines = createInterface({ input: child.stdout ?? process.stdin });
      lines.on('line', (l) => {
        const m = /(http:\/\/\S+)/.exec(l);
        if (m !== null) resolve(m[1] ?? '');
      });
      child.once('exit', (code) => reject(new Error(`fencepost dashboard exited (${code})`)));
    });
    const pid = child.pid ?? 0;

    // 3. The page.
    browser = await launchBrowser();
    const page: Page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const browserCdp = await browser.newBrowserCDPSession();
    const rendererPids = async (): Promise<number[]> => {
      const info = await browserCdp.send('SystemInfo.getProcessInfo');
      return info.processInfo.filter((p) => p.type === 'renderer').map((p) => p.id);
    };
    // The baseline: the same tab on about:blank, before the dashboard.
    await page.goto('about:blank');
    await sleep(1000);
    const blankPids = await rendererPids();
    const blankPage = {
      rssMB: Number(Math.max(0, ...blankPids.map((p) => procStat(p).rssMB)).toFixed(1)),
      pssMB: Number(Math.max(0, ...blankPids.map((p) => memoryMB(p).pss)).toFixed(1)),
      ussMB: Number(Math.max(0, ...blankPids.map((p) => memoryMB(p).uss)).toFixed(1)),
    };
    t0 = performance.now();
    await page.goto(url);
    await page.waitForFunction(
      (n: number) => {
        const doc = (
          globalThis as unknown as {
            document: {
              getElementById(id: string): { textContent: string | null } | null;
              querySelectorAll(s: string): { length: number };
            };
          }
        ).document;
        return (
          doc.getElementById('count')?.textContent === `${n} of ${n} locks shown` &&
          doc.querySelectorAll('#lock-rows tr[data-key]').length > 0
        );
      },
      N,
      { timeout: 120_000 },
    );
    const firstPaintMs = performance.now() - t0;
    process.stderr.write(`page lists ${N} locks after ${firstPaintMs.toFixed(0)} ms\n`);
    const renderedKeys = (): Promise<string[]> =>
      page
        .locator('#lock-rows tr[data-key]')
        .evaluateAll((trs) => trs.map((tr) => (tr as unknown as Attrs).getAttribute('data-key') ?? ''));
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');

    // 4. Churn, 5. sample.
    const end = performance.now() + seconds * 1000;
    const latencies: number[] = [];
    let renewals = 0;
    let handovers = 0;
    let failures = 0;
    const renewLoop = (async () => {
      const perTick = Math.max(1, Math.round(N / renewEvery / 10));
      let i = 0;
      while (performance.now() < end) {
        const batch = Array.from({ length: perTick }, () => names[i++ % N] ?? '');
        await pool(batch, 8, async (name) => {
          try {
            await json.request({
              method: 'PATCH',
              path: `${leasePath}/${leaseName(name)}`,
              contentType: 'application/merge-patch+json',
              body: { spec: { renewTime: now() } },
            });
            renewals++;
          } catch {
            failures++;
          }
        });
        await sleep(100);
      }
    })();
    const handover = async (name: string): Promise<string> => {
      const token = (tokens.get(name) ?? 1) + 1;
      tokens.set(name, token);
      const holder = `${name}-pod-${token % 2}`;
      const at = now();
      await json.request({
        method: 'PATCH',
        path: `${leasePath}/${leaseName(name)}`,
        contentType: 'application/merge-patch+json',
        body: {
          metadata: { annotations: { [TOKEN_ANNOTATION]: String(token) } },
          spec: { holderIdentity: `${holder}/uid-${token}`, acquireTime: at, renewTime: at, leaseTransitions: token },
        },
      });
      await json.request({
        method: 'PATCH',
        path: `${lockPath}/${name}/status`,
        contentType: 'application/merge-patch+json',
        body: {
          status: {
            holder: { name: holder, uid: `uid-${token}` },
            fencingToken: String(token),
            acquireTime: at.replace(/\.\d+Z$/, 'Z'),
            leaseDurationSeconds: 15,
            conditions: [
              {
                type: 'Held',
                status: 'True',
                reason: 'Granted',
                message: `Held by ${holder}`,
                lastTransitionTime: at.replace(/\.\d+Z$/, 'Z'),
              },
            ],
          },
        },
      });
      await json.request({
        method: 'POST',
        path: `/api/v1/namespaces/${ns}/events`,
        body: {
          metadata: { generateName: `${name}.` },
          involvedObject: { kind: KIND, apiVersion: API_VERSION, namespace: ns, name },
          reason: 'LeaseGranted',
          message: `Granted to pod ${holder} with fencing token ${token} (benchmark handover)`,
          type: 'Normal',
          firstTimestamp: at.replace(/\.\d+Z$/, 'Z'),
          lastTimestamp: at.replace(/\.\d+Z$/, 'Z'),
          count: 1,
          source: { component: 'dashboard-bench' },
        },
      });
      handovers++;
      return String(token);
    };
    /** timing: a timed handover is waiting for its row, which scrolling must not take away. */
    let timing = false;
    let scrolls = 0;
    const scrollLoop = (async () => {
      while (scrollEvery > 0 && performance.now() < end) {
        await sleep(scrollEvery * 1000);
        if (timing) continue;
        await page.evaluate(
          `window.scrollTo(0, Math.random() * (document.documentElement.scrollHeight - window.innerHeight))`,
        );
        scrolls++;
      }
    })();
    const handoverLoop = (async () => {
      let k = 0;
      let lastTimed = 0;
      while (performance.now() < end) {
        let name = names[Math.floor(Math.random() * N)] ?? '';
        try {
          if (performance.now() - lastTimed > 5000) {
            lastTimed = performance.now();
            timing = true;
            // A lock on screen: only rendered rows are updated in the DOM.
            const onScreen = await renderedKeys();
            name = (onScreen[Math.floor(Math.random() * onScreen.length)] ?? `${ns}/${name}`).split('/')[1] ?? name;
            const started = performance.now();
            const token = await handover(name);
            await page.waitForFunction(
              ([key, tok]: [string, string]) =>
                (
                  globalThis as unknown as {
                    document: { querySelector(s: string): { textContent: string | null } | null };
                  }
                ).document.querySelector(`tr[data-key="${key}"] td.token`)?.textContent === tok,
              [`${ns}/${name}`, token] as [string, string],
              { polling: 'raf', timeout: 30_000 },
            );
            latencies.push(performance.now() - started);
          } else await handover(name);
        } catch {
          failures++;
        } finally {
          timing = false;
        }
        k++;
        await sleep(1000 / handoversPerSecond);
      }
      return k;
    })();
    const samples: Sample[] = [];
    let prev = { cpuTicks: procStat(pid).cpuTicks, at: performance.now() };
    while (performance.now() < end) {
      await sleep(SAMPLE_MS);
      const s = procStat(pid);
      const at = performance.now();
      const pids = await rendererPids();
      const rendererRss = Math.max(0, ...pids.map((p) => procStat(p).rssMB));
      const rendererPss = Math.max(0, ...pids.map((p) => memoryMB(p).pss));
      const rendererUss = Math.max(0, ...pids.map((p) => memoryMB(p).uss));
      const metrics = await cdp.send('Performance.getMetrics');
      const heap = metrics.metrics.find((m) => m.name === 'JSHeapUsedSize')?.value ?? 0;
      samples.push({
        t: Math.round((at - (end - seconds * 1000)) / 1000),
        serverCpu: (s.cpuTicks - prev.cpuTicks) / TICKS / ((at - prev.at) / 1000),
        serverRssMB: s.rssMB,
        rendererRssMB: rendererRss,
        rendererPssMB: rendererPss,
        rendererUssMB: rendererUss,
        jsHeapMB: heap / 2 ** 20,
      });
      prev = { cpuTicks: s.cpuTicks, at };
    }
    await Promise.all([renewLoop, handoverLoop, scrollLoop]);
    // Reclaimable or kept? A full garbage collection in the page, then the renderer once more.
    await cdp.send('HeapProfiler.collectGarbage');
    await sleep(2000);
    const afterGc = Math.max(0, ...(await rendererPids()).map((p) => memoryMB(p).uss));
    const rowsRendered = await page.locator('#lock-rows tr[data-key]').count();
    const rowsListed = Number(await page.locator('#locks').getAttribute('aria-rowcount')) - 1;
    const max = (k: keyof Sample): number => Math.max(...samples.map((s) => s[k]));
    const mean = (k: keyof Sample): number => samples.reduce((a, s) => a + s[k], 0) / samples.length;
    const result = {
      at: new Date().toISOString(),
      machine,
      loadStart,
      loadEnd: loadAverage(),
      settings: {
        locks: N,
        seconds,
        renewEverySeconds: renewEvery,
        handoversPerSecond,
        scrollEverySeconds: scrollEvery,
      },
      rowsListed,
      rowsRendered,
      scrolls,
      firstPaintMs: Math.round(firstPaintMs),
      writes: { renewals, handovers, failures },
      server: {
        cpuCoresMean: Number(mean('serverCpu').toFixed(3)),
        cpuCoresMax: Number(max('serverCpu').toFixed(3)),
        rssMBMax: Number(max('serverRssMB').toFixed(1)),
      },
      tab: {
        rendererRssMBMax: Number(max('rendererRssMB').toFixed(1)),
        rendererPssMBMax: Number(max('rendererPssMB').toFixed(1)),
        rendererUssMBMax: Number(max('rendererUssMB').toFixed(1)),
        rendererUssMBAfterGc: Number(afterGc.toFixed(1)),
        blankPage,
        jsHeapUsedMBMax: Number(max('jsHeapMB').toFixed(1)),
      },
      updateLatencyMs: {
        n: latencies.length,
        p50: Math.round(percentile(latencies, 50)),
        max: Math.round(Math.max(...latencies)),
      },
      samples,
    };
    const path = writeResult('dashboard.json', result);
    process.stdout.write(
      `${JSON.stringify({ ...result, samples: `${samples.length} samples in ${path}` }, null, 2)}\n`,
    );
  } finally {
    await browser?.close();
    if (dashboard !== undefined && dashboard.exitCode === null) {
      const exited = new Promise((r) => dashboard?.once('exit', r));
      dashboard.kill('SIGTERM');
      await exited;
    }
    await plane.stop();
  }
}

runMain('dashboard', main);
