/**
 * Credentials: the TLS material and the bearer token of one {@link ClusterConfig}, with the files
 * among them read again on a schedule rather than on every request. The kubelet rotates a
 * projected ServiceAccount token (about every 48 minutes by default; the token stays valid a
 * while after) and cert-manager-style tooling rotates certificate files: client-go re-reads a
 * token file about once a minute, and so does this.
 *
 * Guarantees: a token file is read at the first request and again at the first request after
 * `reloadMs` since the last read; TLS files likewise, and {@link Credentials.tls} reports a new
 * generation only when their bytes changed (the client then builds a new connection pool). A
 * failed re-read keeps the last good value (logged by the caller through the error it returns
 * the first time) — a file briefly missing during an atomic rotation does not fail requests.
 * An exec plugin's token is kept until its `expirationTimestamp` (or, without one, until a 401
 * asks for a fresh one: {@link Credentials.invalidate}).
 */
import { readFileSync } from 'node:fs';
import type { ClusterConfig, Material } from './config.ts';
import { runExecPlugin, type ExecCredential } from './exec-credential.ts';
import { OidcTokens } from './oidc.ts';

/** TlsMaterial is what the TLS connections are made with. */
export interface TlsMaterial {
  readonly ca: Buffer | undefined;
  readonly cert: Buffer | undefined;
  readonly key: Buffer | undefined;
  /** generation changes whenever any of the bytes above changed. */
  readonly generation: number;
}

/** DEFAULT_RELOAD_MS: files are read again at most once a minute, as client-go reads a token file. */
export const DEFAULT_RELOAD_MS = 60_000;

/** CredentialsOptions are the seams of {@link Credentials}. */
export interface CredentialsOptions {
  /** reloadMs: how old a file's contents may get before the next request reads it again; default 1 minute. */
  readonly reloadMs?: number;
  /** nowMs is a monotonic clock in ms; default performance.now. */
  readonly nowMs?: () => number;
  /** wallNow is the wall clock, for exec credential expiry; default Date.now. */
  readonly wallNow?: () => number;
}

/** Credentials hands out the current TLS material and Authorization header of one cluster. */
export class Credentials {
  readonly #cfg: ClusterConfig;
  readonly #reloadMs: number;
  readonly #nowMs: () => number;
  readonly #wallNow: () => number;
  #tls: TlsMaterial | undefined;
  #tlsReadAt = 0;
  #token: string | undefined;
  #tokenReadAt = 0;
  #exec: ExecCredential | undefined;
  #execPending: Promise<ExecCredential> | undefined;
  readonly #oidc: OidcTokens | undefined;

  constructor(cfg: ClusterConfig, o: CredentialsOptions = {}) {
    this.#cfg = cfg;
    this.#reloadMs = o.reloadMs ?? DEFAULT_RELOAD_MS;
    this.#nowMs = o.nowMs ?? (() => performance.now());
    this.#wallNow = o.wallNow ?? Date.now;
    this.#oidc = cfg.oidc !== undefined ? new OidcTokens(cfg.oidc, this.#wallNow) : undefined;
  }

  /**
   * tls returns the TLS material, reading the files again when the last read is older than
   * reloadMs. Throws when a file cannot be read the first time.
   */
  tls(): TlsMaterial {
    const now = this.#nowMs();
    const last = this.#tls;
    if (last !== undefined && now - this.#tlsReadAt < this.#reloadMs) return last;
    let ca: Buffer | undefined;
    let cert: Buffer | undefined;
    let key: Buffer | undefined;
    try {
      ca = read(this.#cfg.ca, 'certificate authority');
      cert = read(this.#cfg.clientCert, 'client certificate');
      key = read(this.#cfg.clientKey, 'client key');
    } catch (err) {
      if (last === undefined) throw err;
      this.#tlsReadAt = now;
      return last; // keep the last good material through a rotation's gap
    }
    this.#tlsReadAt = now;
    if (last !== undefined && same(last.ca, ca) && same(last.cert, cert) && same(last.key, key)) return last;
    this.#tls = { ca, cert, key, generation: (last?.generation ?? 0) + 1 };
    return this.#tls;
  }

  /**
   * authorization is the Authorization header value, or undefined without credentials: a bearer
   * token (token file, inline token, exec plugin, oidc provider, in client-go's order of
   * precedence), else HTTP basic from username and password.
   */
  async authorization(): Promise<string | undefined> {
    const cfg = this.#cfg;
    if (cfg.tokenFile !== undefined) {
      const now = this.#nowMs();
      if (this.#token === undefined || now - this.#tokenReadAt >= this.#reloadMs) {
        try {
          const t = readFileSync(cfg.tokenFile, 'utf8').trim();
          if (t === '') throw new Error(`token file ${cfg.tokenFile} is empty`);
          this.#token = t;
        } catch (err) {
          if (this.#token === undefined) throw new Error(`Failed to read token file ${cfg.tokenFile}`, { cause: err });
        }
        this.#tokenReadAt = now;
      }
      return `Bearer ${this.#token}`;
    }
    if (cfg.token !== undefined) return `Bearer ${cfg.token}`;
    if (cfg.exec !== undefined) {
      const cred = await this.#execCredential();
      return cred.token !== undefined ? `Bearer ${cred.token}` : undefined;
    }
    if (this.#oidc !== undefined) return `Bearer ${await this.#oidc.token()}`;
    if (cfg.basic !== undefined)
      return `Basic ${Buffer.from(`${cfg.basic.username}:${cfg.basic.password}`).toString('base64')}`;
    return undefined;
  }

  /** invalidate forgets a cached token (after a 401), so the next request reads or asks again. */
  invalidate(): void {
    this.#token = undefined;
    this.#exec = undefined;
    this.#oidc?.invalidate();
  }

  async #execCredential(): Promise<ExecCredential> {
    const exec = this.#cfg.exec;
    if (exec === undefined) throw new Error('no exec plugin');
    const have = this.#exec;
    if (have !== undefined && (have.expiresAtMs === undefined || have.expiresAtMs - 10_000 > this.#wallNow()))
      return have;
    this.#execPending ??= runExecPlugin(exec, this.#cfg.server).finally(() => {
      this.#execPending = undefined;
    });
    const cred = await this.#execPending;
    this.#exec = cred;
    return cred;
  }
}

function read(m: Material | undefined, what: string): Buffer | undefined {
  if (m === undefined) return undefined;
  if ('data' in m) return m.data;
  try {
    return readFileSync(m.file);
  } catch (err) {
    throw new Error(`Failed to read ${what} file ${m.file}`, { cause: err });
  }
}

function same(a: Buffer | undefined, b: Buffer | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && a.equals(b));
}
