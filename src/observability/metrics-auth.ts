/**
 * Authentication and authorization of /metrics requests, delegated to the API server the way
 * kubebuilder's secure metrics server does it (controller-runtime's
 * `filters.WithAuthenticationAndAuthorization`): the request's bearer token is checked with a
 * TokenReview, then the user it names with a SubjectAccessReview for the verb `get` on the
 * non-resource URL of the request's path (`/metrics`). A Prometheus whose ServiceAccount is bound
 * to a ClusterRole allowing `get` on the nonResourceURL `/metrics` (the chart's
 * `<release>-fencepost-metrics-reader`) is let in; no token or a token the API server does not
 * accept is 401, an authenticated user without that right is 403.
 *
 * Decisions are cached so that a scrape every few seconds does not cost two API requests each:
 * an authenticated token for `authnTtlMs` (default 1 minute, controller-runtime's), a rejected one
 * and a denial for `denyTtlMs` (default 30 s), an allowance for `allowTtlMs` (default 5 minutes;
 * the API server's webhook-authorizer defaults). A decision is never used after its TTL: a
 * revoked binding stops a scraper within `allowTtlMs`. Errors reaching the API server are 500 and
 * are not cached. Tokens are kept only as SHA-256 digests.
 *
 * The reviews are sent by the caller's `review` function (the composition root wires the
 * KubeConfig's JSON client), so this module needs no Kubernetes client.
 */
import { createHash } from 'node:crypto';

/** TOKEN_REVIEW_PATH and ACCESS_REVIEW_PATH are where the reviews are POSTed. */
export const TOKEN_REVIEW_PATH = '/apis/authentication.k8s.io/v1/tokenreviews';
export const ACCESS_REVIEW_PATH = '/apis/authorization.k8s.io/v1/subjectaccessreviews';

/** AccessRequest is what of an HTTP request the check reads. */
export interface AccessRequest {
  readonly method: string;
  readonly path: string;
  /** authorization: the Authorization header, if any. */
  readonly authorization: string | undefined;
}

/** AccessDecision: 200 lets the request through; 401, 403 and 500 answer it with `message`. */
export type AccessDecision =
  { readonly status: 200; readonly user: string } | { readonly status: 401 | 403 | 500; readonly message: string };

/** MetricsAuthOptions configure {@link metricsAuthorizer}. */
export interface MetricsAuthOptions {
  /** review POSTs `body` to the API server at `path` and resolves with the answer's JSON. */
  readonly review: (path: string, body: unknown) => Promise<unknown>;
  /** authnTtlMs: how long an accepted token is trusted without a new TokenReview. Default 60 s. */
  readonly authnTtlMs?: number;
  /** allowTtlMs: how long an allowance is reused. Default 5 min. */
  readonly allowTtlMs?: number;
  /** denyTtlMs: how long a rejected token or a denial is reused. Default 30 s. */
  readonly denyTtlMs?: number;
  /** maxEntries: cached decisions of each kind kept at most (oldest dropped first). Default 1024. */
  readonly maxEntries?: number;
  /** now: monotonic milliseconds. Defaults to `performance.now`. */
  readonly now?: () => number;
}

/** UserInfo is a TokenReview's `status.user`. */
interface UserInfo {
  readonly username: string;
  readonly uid?: string;
  readonly groups?: readonly string[];
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

type Authn = { readonly user: UserInfo } | { readonly rejected: string };

interface Entry<T> {
  readonly value: T;
  readonly expires: number;
}

/** TtlCache: a Map whose entries are ignored (and dropped) from their expiry on. */
class TtlCache<T> {
  readonly #m = new Map<string, Entry<T>>();
  readonly #max: number;
  readonly #now: () => number;
  constructor(max: number, now: () => number) {
    this.#max = max;
    this.#now = now;
  }
  get(key: string): T | undefined {
    const e = this.#m.get(key);
    if (e === undefined) return undefined;
    if (this.#now() >= e.expires) {
      this.#m.delete(key);
      return undefined;
    }
    return e.value;
  }
  set(key: string, value: T, ttlMs: number): void {
    if (ttlMs <= 0) return;
    this.#m.delete(key);
    this.#m.set(key, { value, expires: this.#now() + ttlMs });
    while (this.#m.size > this.#max) {
      const oldest = this.#m.keys().next();
      if (oldest.done === true) break;
      this.#m.delete(oldest.value);
    }
  }
}

/**
 * metricsAuthorizer returns the check the metrics listener runs before answering (module comment).
 * Only `GET` and `HEAD` reach the reviews (as verb `get`); any other method is 403 at once.
 */
export function metricsAuthorizer(o: MetricsAuthOptions): (r: AccessRequest) => Promise<AccessDecision> {
  const now = o.now ?? (() => performance.now());
  const max = o.maxEntries ?? 1024;
  const authnTtl = o.authnTtlMs ?? 60_000;
  const allowTtl = o.allowTtlMs ?? 300_000;
  const denyTtl = o.denyTtlMs ?? 30_000;
  const tokens = new TtlCache<Authn>(max, now);
  const access = new TtlCache<{ allowed: boolean; reason: string }>(max, now);

  const authenticate = async (token: string): Promise<Authn> => {
    const key = createHash('sha256').update(token).digest('hex');
    const cached = tokens.get(key);
    if (cached !== undefined) return cached;
    const answer = (await o.review(TOKEN_REVIEW_PATH, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token },
    })) as { status?: { authenticated?: boolean; user?: UserInfo; error?: string } } | undefined;
    const status = answer?.status;
    const result: Authn =
      status?.authenticated === true && status.user !== undefined
        ? { user: status.user }
        : { rejected: status?.error ?? 'the token was not accepted' };
    tokens.set(key, result, 'user' in result ? authnTtl : denyTtl);
    return result;
  };

  const authorize = async (user: UserInfo, path: string): Promise<{ allowed: boolean; reason: string }> => {
    const key = JSON.stringify([user.username, user.uid, user.groups, user.extra, path]);
    const cached = access.get(key);
    if (cached !== undefined) return cached;
    const answer = (await o.review(ACCESS_REVIEW_PATH, {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: user.username,
        ...(user.uid !== undefined ? { uid: user.uid } : {}),
        ...(user.groups !== undefined ? { groups: user.groups } : {}),
        ...(user.extra !== undefined ? { extra: user.extra } : {}),
        nonResourceAttributes: { path, verb: 'get' },
      },
    })) as { status?: { allowed?: boolean; reason?: string; evaluationError?: string } } | undefined;
    const allowed = answer?.status?.allowed === true;
    const result = { allowed, reason: answer?.status?.reason ?? answer?.status?.evaluationError ?? '' };
    access.set(key, result, allowed ? allowTtl : denyTtl);
    return result;
  };

  return async (r) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(r.authorization ?? '');
    const token = m?.[1];
    if (token === undefined) return { status: 401, message: 'Unauthorized: no bearer token' };
    if (r.method !== 'GET' && r.method !== 'HEAD') return { status: 403, message: `Forbidden: method ${r.method}` };
    try {
      const who = await authenticate(token);
      if (!('user' in who)) return { status: 401, message: `Unauthorized: ${who.rejected}` };
      const { allowed, reason } = await authorize(who.user, r.path);
      if (!allowed)
        return {
          status: 403,
          message: `Forbidden: user "${who.user.username}" cannot get path "${r.path}"${reason !== '' ? `: ${reason}` : ''}`,
        };
      return { status: 200, user: who.user.username };
    } catch (err) {
      return { status: 500, message: `Authorization failed: ${err instanceof Error ? err.message : String(err)}` };
    }
  };
}
