/**
 * metrics-scrape.ts — `node bench/metrics-scrape.ts [--scrapes N]`: what the controller's secure
 * /metrics costs a scrape. One in-process listener per mode, serving the controller's registry,
 * scraped N times in a row by a Node client: plain HTTP (`--metrics-secure=false`); HTTPS with the
 * token check on a kept-alive connection (what Prometheus does between scrapes), its decisions
 * cached; and HTTPS on a new connection per scrape (a TLS handshake each time). The reviews are
 * answered in-process (no API server), so the figures are the listener's own cost: TLS and the
 * cache lookups; an uncached decision adds two API-server round trips, once per TTL. No servers
 * needed. Writes .results/bench/metrics-scrape.json.
 */
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { parseArgs } from 'node:util';
import { serveProbes, type ProbeRoutes } from '../src/observability/http.ts';
import { metricsAuthorizer, TOKEN_REVIEW_PATH } from '../src/observability/metrics-auth.ts';
import { createControllerMetrics } from '../src/observability/metrics.ts';
import { selfSignedCertificate } from '../src/observability/serving-cert.ts';
import { describeMachine, loadAverage, runMain, summarize, textTable, writeResult, type Stats } from './lib.ts';

interface Mode {
  readonly name: string;
  readonly routes: ProbeRoutes;
  readonly tls: boolean;
  readonly keepAlive: boolean;
}

/** scrape GETs url once and resolves with the milliseconds it took (throws unless 200). */
function scrape(url: string, agent: HttpAgent | HttpsAgent | false, tls: boolean): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const send = tls ? httpsRequest : httpRequest;
    const req = send(
      url,
      { agent, headers: { authorization: 'Bearer bench-token' }, ...(tls ? { rejectUnauthorized: false } : {}) },
      (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode === 200) resolve(performance.now() - t0);
          else reject(new Error(`GET ${url}: ${res.statusCode ?? 0}`));
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { scrapes: { type: 'string', default: '500' } }, strict: true });
  const n = Number(values.scrapes);
  const registry = createControllerMetrics().registry;
  const certificate = selfSignedCertificate({ commonName: 'bench', hosts: ['127.0.0.1'] });
  const authorize = metricsAuthorizer({
    review: (path) =>
      Promise.resolve(
        path === TOKEN_REVIEW_PATH
          ? { status: { authenticated: true, user: { username: 'system:serviceaccount:monitoring:prometheus' } } }
          : { status: { allowed: true } },
      ),
  });
  const secure: ProbeRoutes = { registry, tls: { certificate: () => certificate }, authorize };
  const modes: Mode[] = [
    { name: 'plain HTTP, kept alive', routes: { registry }, tls: false, keepAlive: true },
    { name: 'HTTPS + token check (cached), kept alive', routes: secure, tls: true, keepAlive: true },
    { name: 'HTTPS + token check (cached), new connection', routes: secure, tls: true, keepAlive: false },
  ];
  const loadStart = loadAverage();
  const rows: { mode: string; ms: Stats }[] = [];
  for (const m of modes) {
    const server = await serveProbes('127.0.0.1:0', '--metrics-bind-address', m.routes);
    if (server === undefined) throw new Error('no listener');
    const url = `${m.tls ? 'https' : 'http'}://${server.address}/metrics`;
    const agent = m.keepAlive
      ? m.tls
        ? new HttpsAgent({ keepAlive: true })
        : new HttpAgent({ keepAlive: true })
      : false;
    for (let i = 0; i < 20; i++) await scrape(url, agent, m.tls); // warm-up: JIT, the first handshake, the cache
    const xs: number[] = [];
    for (let i = 0; i < n; i++) xs.push(await scrape(url, agent, m.tls));
    if (agent !== false) agent.destroy();
    await server.stop();
    rows.push({ mode: m.name, ms: summarize(xs) });
  }
  const out = writeResult('metrics-scrape.json', {
    benchmark: 'metrics-scrape',
    date: new Date().toISOString(),
    command: `node bench/metrics-scrape.ts --scrapes ${n}`,
    machine: describeMachine(),
    loadAverage: { start: loadStart, end: loadAverage() },
    scrapes: n,
    rows,
  });
  const table = textTable(
    [
      ['mode', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms'],
      ...rows.map((r) => [r.mode, String(r.ms.p50), String(r.ms.p90), String(r.ms.p99), String(r.ms.max)]),
    ],
    1,
  );
  process.stdout.write(`${table.join('\n')}\n${out}\n`);
}

runMain('metrics-scrape', main);
