/**
 * Plain HTTPS to the test API server, without client-node: one kept-alive connection (what the
 * API server and etcd themselves cost, for the floor), the raw text of `/metrics`, and a parser
 * for the Prometheus text format that `/metrics` (kube-apiserver, etcd, fencepost) speaks.
 */
import { readFileSync } from 'node:fs';
import { Agent, request as httpsRequest } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

/** RawObject is an API object as JSON, kept as the server sent it. */
export interface RawObject {
  readonly metadata?: { readonly resourceVersion?: string; readonly annotations?: Record<string, string> };
  readonly [key: string]: unknown;
}

/** KeepAliveClient talks to the API server over one kept-alive HTTPS connection (node:https). */
export interface KeepAliveClient {
  request(method: 'GET' | 'PUT', path: string, body?: RawObject): Promise<RawObject>;
  /** text GETs a non-JSON path (e.g. /metrics) and returns the body. */
  text(path: string): Promise<string>;
  close(): void;
}

/** keepAliveClient makes a KeepAliveClient from the kubeconfig's current cluster and user (certificate or token). */
export function keepAliveClient(kc: KubeConfig): KeepAliveClient {
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  if (cluster === null || user === null) throw new Error('kubeconfig has no current cluster or user');
  const pem = (file: string | undefined, data: string | undefined): Buffer | undefined =>
    file !== undefined ? readFileSync(file) : data !== undefined ? Buffer.from(data, 'base64') : undefined;
  const ca = pem(cluster.caFile, cluster.caData);
  const cert = pem(user.certFile, user.certData);
  const key = pem(user.keyFile, user.keyData);
  const agent = new Agent({
    keepAlive: true,
    maxSockets: 1,
    rejectUnauthorized: cluster.skipTLSVerify !== true,
    ...(ca !== undefined ? { ca } : {}),
    ...(cert !== undefined ? { cert } : {}),
    ...(key !== undefined ? { key } : {}),
  });
  const headers: Record<string, string> = { accept: 'application/json' };
  if (user.token !== undefined) headers['authorization'] = `Bearer ${user.token}`;
  const send = (method: 'GET' | 'PUT', path: string, payload: string | undefined, accept: string): Promise<string> =>
    new Promise<string>((resolvePromise, reject) => {
      const h = { ...headers, accept, ...(payload !== undefined ? { 'content-type': 'application/json' } : {}) };
      const req = httpsRequest(new URL(cluster.server + path), { method, agent, headers: h }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => {
          chunks.push(c);
        });
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          if (status < 200 || status > 299) {
            reject(new Error(`${method} ${path}: HTTP ${status}: ${text.slice(0, 300)}`));
            return;
          }
          resolvePromise(text);
        });
      });
      req.on('error', reject);
      req.end(payload);
    });
  return {
    async request(method, path, body) {
      const text = await send(method, path, body !== undefined ? JSON.stringify(body) : undefined, 'application/json');
      return JSON.parse(text) as RawObject;
    },
    text: (path) => send('GET', path, undefined, 'text/plain'),
    close() {
      agent.destroy();
    },
  };
}

/** MetricSample is one line of the Prometheus text format. */
export interface MetricSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** parseMetrics reads the Prometheus text exposition format (comments skipped; label values unescaped). */
export function parseMetrics(text: string): MetricSample[] {
  const out: MetricSample[] = [];
  const line = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
  const label = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  for (const raw of text.split('\n')) {
    if (raw.startsWith('#') || raw.trim() === '') continue;
    const m = line.exec(raw);
    if (m === null) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(label))
      labels[l[1] ?? ''] = (l[2] ?? '').replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1] ?? '', labels, value: Number(m[3]) });
  }
  return out;
}

/** sumMetric adds the values of every sample named name whose labels match every entry of where. */
export function sumMetric(
  samples: readonly MetricSample[],
  name: string,
  where: Readonly<Record<string, string>> = {},
): number {
  let total = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(where).every(([k, v]) => s.labels[k] === v)) total += s.value;
  }
  return total;
}
