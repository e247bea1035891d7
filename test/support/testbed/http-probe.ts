/** Polling helpers that wait for a server's health endpoint, bounded in time. */
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { request as httpRequest } from 'node:http';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** TlsClient holds the files used to talk to a TLS server as a client. */
export interface TlsClient {
  readonly ca: string;
  readonly cert?: string;
  readonly key?: string;
}

/**
 * GetOptions add to a GET: headers (a bearer token), a CA given as PEM text, or no verification
 * of the server's certificate at all (`insecure`, as a ServiceMonitor's insecureSkipVerify).
 */
export interface GetOptions {
  readonly headers?: Readonly<Record<string, string>>;
  readonly caPem?: string;
  readonly insecure?: boolean;
  /** newConnection: no kept-alive connection (nor TLS session) of an earlier request is reused. */
  readonly newConnection?: boolean;
}

/** getStatus performs one GET and returns the status code and body; it throws on connection errors. */
export async function getStatus(
  url: string,
  tls?: TlsClient,
  timeoutMs = 2000,
  extra: GetOptions = {},
): Promise<{ status: number; body: string }> {
  const u = new URL(url);
  const opts: RequestOptions = { method: 'GET', timeout: timeoutMs, headers: { ...extra.headers } };
  if (tls !== undefined) {
    opts.ca = readFileSync(tls.ca);
    if (tls.cert !== undefined) opts.cert = readFileSync(tls.cert);
    if (tls.key !== undefined) opts.key = readFileSync(tls.key);
  }
  if (extra.caPem !== undefined) opts.ca = extra.caPem;
  if (extra.insecure === true) opts.rejectUnauthorized = false;
  if (extra.newConnection === true) opts.agent = false;
  const send = u.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(u, opts, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/**
 * waitHealthy polls url until it answers 200, the check `alive` returns false (the process died),
 * or timeoutMs passes; it throws with the last answer in the last two cases.
 */
export async function waitHealthy(
  url: string,
  opts: { tls?: TlsClient; timeoutMs: number; alive: () => boolean; what: string },
): Promise<void> {
  const deadline = performance.now() + opts.timeoutMs;
  let last = 'no answer';
  while (performance.now() < deadline) {
    if (!opts.alive()) throw new Error(`${opts.what} exited before it became healthy (last: ${last})`);
    try {
      const r = await getStatus(url, opts.tls);
      if (r.status === 200) return;
      last = `${r.status} ${r.body.slice(0, 500)}`;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    await sleep(100);
  }
  throw new Error(`${opts.what} not healthy at ${url} after ${opts.timeoutMs} ms (last: ${last})`);
}
