/**
 * The `oidc` auth provider, the one kubectl 1.36 still has: its `id-token` is the bearer token
 * while the token's own `exp` claim is more than 10 s away (client-go's expiry margin); after
 * that, with a `refresh-token`, a new one comes from the identity provider's token endpoint
 * (OpenID Connect discovery at `<idp-issuer-url>/.well-known/openid-configuration`, then an OAuth2
 * refresh-token grant). Unlike kubectl, a refreshed token is kept in memory, not written back to
 * the kubeconfig file: a process that restarts refreshes again.
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { readFileSync } from 'node:fs';
import type { OidcConfig } from './config.ts';

/** EXPIRY_MARGIN_MS: a token this close to its `exp` counts as expired, as client-go's expiryDelta. */
const EXPIRY_MARGIN_MS = 10_000;
/** IDP_TIMEOUT_MS bounds one request to the identity provider. */
const IDP_TIMEOUT_MS = 30_000;

/** OidcTokens hands out the current id-token of one user, refreshing it when it expired. */
export class OidcTokens {
  readonly #cfg: OidcConfig;
  readonly #wallNow: () => number;
  #idToken: string | undefined;
  #refreshToken: string | undefined;
  #pending: Promise<string> | undefined;

  constructor(cfg: OidcConfig, wallNow: () => number = Date.now) {
    this.#cfg = cfg;
    this.#wallNow = wallNow;
    this.#idToken = cfg.idToken;
    this.#refreshToken = cfg.refreshToken;
  }

  /** token resolves to a valid id-token, refreshing it first when it is expired (or forgotten). */
  async token(): Promise<string> {
    const have = this.#idToken;
    if (have !== undefined && !expired(have, this.#wallNow(), this.#where)) return have;
    if (this.#refreshToken === undefined)
      throw new Error(`${this.#where}: the id-token has expired, and there is no refresh-token to get a new one`);
    this.#pending ??= this.#refresh().finally(() => {
      this.#pending = undefined;
    });
    return await this.#pending;
  }

  /** invalidate forgets the id-token (after a 401): the next request refreshes it, when it can. */
  invalidate(): void {
    if (this.#refreshToken !== undefined) this.#idToken = undefined;
  }

  get #where(): string {
    return `users[${this.#cfg.user}].user.auth-provider (oidc)`;
  }

  async #refresh(): Promise<string> {
    const issuer = (this.#cfg.issuerUrl ?? '').replace(/\/+$/, '');
    const ca =
      this.#cfg.ca === undefined
        ? undefined
        : 'data' in this.#cfg.ca
          ? this.#cfg.ca.data
          : readFileSync(this.#cfg.ca.file);
    const meta = await send(new URL(`${issuer}/.well-known/openid-configuration`), ca, undefined, this.#where);
    const tokenUrl = (meta as { token_endpoint?: unknown }).token_endpoint;
    if (typeof tokenUrl !== 'string' || tokenUrl === '')
      throw new Error(`${this.#where}: the discovery document of ${issuer} has no token_endpoint`);
    const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: this.#refreshToken ?? '' });
    if (this.#cfg.clientId !== undefined) form.set('client_id', this.#cfg.clientId);
    if (this.#cfg.clientSecret !== undefined) form.set('client_secret', this.#cfg.clientSecret);
    const answer = (await send(new URL(tokenUrl), ca, form.toString(), this.#where)) as {
      id_token?: unknown;
      refresh_token?: unknown;
    };
    if (typeof answer.id_token !== 'string' || answer.id_token === '')
      throw new Error(
        `${this.#where}: the token endpoint's answer has no id_token (was the scope "openid" requested at login?)`,
      );
    this.#idToken = answer.id_token;
    if (typeof answer.refresh_token === 'string' && answer.refresh_token !== '')
      this.#refreshToken = answer.refresh_token;
    return answer.id_token;
  }
}

/** expired reads a JWT's `exp` claim (seconds since the epoch); a token without one never expires. */
export function expired(jwt: string, nowMs: number, where: string): boolean {
  const parts = jwt.split('.');
  if (parts.length !== 3) throw new Error(`${where}: the id-token is not a JWT (three dot-separated parts)`);
  let claims: { exp?: unknown };
  try {
    claims = JSON.parse(Buffer.from(parts[1] ?? '', 'base64url').toString('utf8')) as { exp?: unknown };
  } catch {
    throw new Error(`${where}: the id-token's claims are not base64url JSON`);
  }
  if (typeof claims.exp !== 'number') return false;
  return claims.exp * 1000 - EXPIRY_MARGIN_MS <= nowMs;
}

/** send GETs `url` (or POSTs the form `body`) and parses the JSON answer of a 200. */
async function send(url: URL, ca: Buffer | undefined, body: string | undefined, where: string): Promise<unknown> {
  return await new Promise((resolve, reject) => {
    const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(
      url,
      {
        method: body === undefined ? 'GET' : 'POST',
        headers: {
          Accept: 'application/json',
          ...(body !== undefined
            ? { 'Content-Type': 'application/x-www-form-urlencoded', 'Content-Length': String(Buffer.byteLength(body)) }
            : {}),
        },
        ...(ca !== undefined ? { ca } : {}),
        timeout: IDP_TIMEOUT_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200) {
            reject(new Error(`${where}: ${url.href}: HTTP ${res.statusCode}: ${text.slice(0, 80)}`));
            return;
          }
          try {
            resolve(JSON.parse(text) as unknown);
          } catch {
            reject(new Error(`${where}: ${url.href} did not answer JSON`));
          }
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${where}: ${url.href} did not answer within ${IDP_TIMEOUT_MS} ms`)));
    req.on('error', (err) => reject(new Error(`${where}: ${url.href}: ${err.message}`, { cause: err })));
    req.end(body);
  });
}
