/**
 * The HTTP fencing guard: a service that owns a resource refuses requests whose `Fencing-Token`
 * header is below the highest token it has seen succeed.
 *
 * Two phases, because the mark may be raised only by a write that actually happened (otherwise a
 * request with a forged huge token that then fails, say at authorisation, would lock every real
 * holder out):
 * 1. `book.check(name, header)` — is the token well formed and not below the mark? Changes
 *    nothing.
 * 2. the handler performs the write;
 * 3. `book.commit(name, token)` — only if the write succeeded: raise the mark. The middleware
 *    commits when the handler ends its response with a success status (`res.end`, not the
 *    'finish' event, which never fires when the client has gone away meanwhile).
 *
 * Check, write and commit must not interleave with a request carrying another token (token 6
 * checked, token 5 checked, 6 written, 5 written would let the stale holder win), so they run
 * inside `book.enter(name, token)`, a FIFO critical section per mark that requests with the same
 * token share (the same holder's writes may overlap; a different token waits until they are
 * done). `httpGuard` (the middleware) and `book.guarded` do all of that; use `check`/`commit`
 * directly only inside `enter`.
 *
 * Scope: a mark per resource let a stale holder write what its successor had not, so by default the middleware keeps **one mark per lock**
 * (`fencepost:lock:<lock>`, lock 'default') for every request it guards: once token N+1 has
 * written any path, token N can write none. `scope: 'resource'` keeps one mark per resource
 * (by default the normalised URL path, see normalizeResource) — weaker: a stale holder can still
 * write every path the newer holder has not, and any spelling of a path that the app's router
 * treats as the same but the normaliser does not (case, for one) is a separate mark. Names under
 * `fencepost:` are reserved for lock marks, so no resource name can be one.
 *
 * An abandoned handler (its client went away) may still be writing: by default the guard keeps
 * its section until the handler ends its response, however long that takes, so no other token
 * gets in meanwhile. `abandonAfterMs` trades that for liveness (see HttpGuardOptions).
 *
 * The marks live in this process's memory: they are lost on restart and not shared between
 * replicas of the service. Persist them (`snapshot`, `new FenceBook({ initial })`) or use the
 * Redis or SQL guard, whose mark lives with the data, when either matters.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseToken, TokenError } from '../protocol/token.ts';
import { defaultResource, type NormalizeOptions } from './http-resource.ts';

export { defaultResource, normalizeResource, type NormalizeOptions } from './http-resource.ts';

/** FenceCheck is the verdict on one request's token: accepted (with the parsed token) or refused
 *  with the HTTP status to answer (400 malformed or missing, 409 stale) and a message. */
export type FenceCheck =
  | { readonly ok: true; readonly token: bigint }
  | { readonly ok: false; readonly status: 400; readonly reason: string }
  | { readonly ok: false; readonly status: 409; readonly reason: string; readonly highWater: bigint };

/** FenceBookOptions seeds a book, e.g. from a snapshot saved before a restart. */
export interface FenceBookOptions {
  /** initial marks, e.g. `snapshot()` of an earlier book; invalid tokens throw TokenError. */
  readonly initial?: Iterable<readonly [string, bigint]>;
}

interface Section {
  /** active: holders inside; token: theirs (undefined: an exclusive holder). */
  active: number;
  token: bigint | undefined;
  readonly queue: { readonly token: bigint | undefined; readonly admit: () => void }[];
}

/**
 * FenceBook keeps one high-water mark per resource name, in memory. `check` is pure; only
 * `commit` raises a mark, and never lowers one. Resource names are compared exactly: map every
 * spelling of a resource to one name, or a stale holder can write through an alias.
 */
export class FenceBook {
  readonly #marks = new Map<string, bigint>();
  readonly #sections = new Map<string, Section>();

  constructor(opts: FenceBookOptions = {}) {
    for (const [resource, mark] of opts.initial ?? [])
      this.commit(resource, parseToken(mark.toString(), `initial mark of ${resource}`));
  }

  /** highWater is the resource's mark, undefined when no write has succeeded yet. */
  highWater(resource: string): bigint | undefined {
    return this.#marks.get(resource);
  }

  /** snapshot copies every mark (to persist them across restarts). */
  snapshot(): Map<string, bigint> {
    return new Map(this.#marks);
  }

  /**
   * check judges a token header value against the resource's mark without changing anything.
   * `tokenText` is the raw header (undefined when absent; Node joins repeated headers with ", ",
   * which is malformed). A token equal to the mark passes: the same holder writing again.
   */
  check(resource: string, tokenText: string | readonly string[] | undefined, header = 'Fencing-Token'): FenceCheck {
    if (tokenText === undefined) return { ok: false, status: 400, reason: `missing ${header} header` };
    const text = typeof tokenText === 'string' ? tokenText : tokenText.join(', ');
    let token: bigint;
    try {
      token = parseToken(text, `${header} header`);
    } catch (err) {
      if (err instanceof TokenError) return { ok: false, status: 400, reason: err.message };
      throw err;
    }
    const mark = this.#marks.get(resource);
    if (mark !== undefined && token < mark) {
      return { ok: false, status: 409, reason: `stale fencing token ${token} < ${mark}`, highWater: mark };
    }
    return { ok: true, token };
  }

  /**
   * commit records that a write with `token` succeeded: the mark becomes max(mark, token). It
   * returns false when the mark was already above the token, which inside `enter` after a passed
   * `check` cannot happen (outside it, it means a stale write has just been applied).
   */
  commit(resource: string, token: bigint): boolean {
    const mark = this.#marks.get(resource);
    if (mark !== undefined && mark > token) return false;
    this.#marks.set(resource, token);
    return true;
  }

  /**
   * enter waits for the critical section of `name` (FIFO) and returns the function that leaves
   * it; call it exactly once, also on errors (further calls do nothing). Without a token the
   * section is exclusive. With one, requests carrying the same token share it: one is let in at
   * once when the section is free, or held by that token with nobody waiting; a different token
   * waits until every holder has left. A holder that never leaves blocks the name.
   */
  async enter(name: string, token?: bigint): Promise<() => void> {
    let section = this.#sections.get(name);
    if (section === undefined) {
      section = { active: 0, token: undefined, queue: [] };
      this.#sections.set(name, section);
    }
    const s = section;
    const joins = s.active === 0 || (token !== undefined && s.token === token && s.queue.length === 0);
    if (joins) {
      s.active++;
      s.token = token;
    } else {
      await new Promise<void>((resolve) => s.queue.push({ token, admit: resolve }));
    }
    let left = false;
    return () => {
      if (left) return;
      left = true;
      s.active--;
      if (s.active > 0) return;
      const first = s.queue.shift();
      if (first === undefined) {
        if (this.#sections.get(name) === s) this.#sections.delete(name);
        return;
      }
      s.active = 1;
      s.token = first.token;
      first.admit();
      // Everyone queued right behind it with the same token comes in with it.
      while (first.token !== undefined && s.queue[0]?.token === first.token) {
        s.active++;
        s.queue.shift()?.admit();
      }
    };
  }

  /** inFlight is how many requests are inside the critical section of `name` (0 when free). */
  inFlight(name: string): number {
    return this.#sections.get(name)?.active ?? 0;
  }

  /**
   * guarded runs one fenced write: inside the resource's critical section it checks the token,
   * runs `write` if it passed, and commits the token when `write` resolves (not when it
   * rejects: the rejection propagates and the mark stays). A refused check is returned, and
   * `write` is not called.
   */
  async guarded<T>(
    resource: string,
    tokenText: string | readonly string[] | undefined,
    write: (token: bigint) => Promise<T>,
  ): Promise<{ readonly ok: true; readonly value: T } | Exclude<FenceCheck, { ok: true }>> {
    const leave = await this.enter(resource);
    try {
      const verdict = this.check(resource, tokenText);
      if (!verdict.ok) return verdict;
      const value = await write(verdict.token);
      this.commit(resource, verdict.token);
      return { ok: true, value };
    } finally {
      leave();
    }
  }
}

/** HttpGuardOptions configures the middleware. */
export interface HttpGuardOptions {
  /** header carries the token (default `fencing-token`, matched case-insensitively). */
  readonly header?: string;
  /**
   * scope: 'lock' (the default when no `resource` is given) keeps one mark and one critical
   * section for every request through this middleware, named `fencepost:lock:<lock>`;
   * 'resource' (the default when `resource` is given) one per resource name — weaker: a stale
   * holder can still write every resource the newer holder has not written.
   */
  readonly scope?: 'lock' | 'resource';
  /**
   * lock names the lock whose tokens the requests carry (scope 'lock'; default 'default'). Two
   * middlewares on one book with the same lock share its mark; give each lock its own.
   */
  readonly lock?: string;
  /**
   * resource names the fenced resource of a request (scope 'resource'; default: the URL path
   * normalised by normalizeResource). Map every spelling your router treats as one resource to
   * one name: a stale holder can write through any alias you miss. A name may not start with
   * `fencepost:` (reserved for lock marks): such a request gets a 400.
   */
  readonly resource?: (req: IncomingMessage) => string;
  /**
   * caseInsensitive folds the default resource names to lower case (scope 'resource'): set it when
   * your router matches paths case-insensitively (Express does by default). Default false: paths
   * are case-sensitive (RFC 3986), and folding them would make distinct resources share a mark —
   * safe, but one's writes then refuse the other's stale-looking ones.
   */
  readonly caseInsensitive?: boolean;
  /** succeeded tells, when the handler ends the response, whether its write happened
   *  (default: status below 400). */
  readonly succeeded?: (res: ServerResponse) => boolean;
  /**
   * abandonAfterMs: when the client disconnects before the handler ends the response, how long to
   * keep the critical section for the handler before letting requests with other tokens in
   * without a commit. Default: forever — the handler may still be writing, and a request let in
   * meanwhile could see its write overtaken by the older token's. WARNING: a finite value brings
   * that race back for handlers slower than it; it aborts `fencingSignalOf(req)` when it gives
   * up, so a handler that passes the signal to its writes stops them. A handler that never ends
   * its response (also after the client left) blocks the lock forever without it.
   */
  readonly abandonAfterMs?: number;
}

/** HttpMiddleware is a connect-style handler on plain node:http. */
export type HttpMiddleware = (req: IncomingMessage, res: ServerResponse, next: () => void) => void;

const tokens = new WeakMap<IncomingMessage, bigint>();
const signals = new WeakMap<IncomingMessage, AbortSignal>();

/** fencingTokenOf returns the token the guard accepted for this request (undefined if none). */
export function fencingTokenOf(req: IncomingMessage): bigint | undefined {
  return tokens.get(req);
}

/**
 * fencingSignalOf returns the signal the guard aborts when it stops serialising this request's
 * handler (abandonAfterMs after its client left): pass it to the handler's writes, so that a write
 * the guard no longer covers is cancelled. Undefined for a request the guard did not let in.
 */
export function fencingSignalOf(req: IncomingMessage): AbortSignal | undefined {
  return signals.get(req);
}

/** LOCK_MARK_PREFIX starts the book names of lock marks; resource names may not start with `fencepost:`. */
export const LOCK_MARK_PREFIX = 'fencepost:lock:';

function reply(res: ServerResponse, status: number, body: Record<string, string>): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

function refuse(res: ServerResponse, verdict: Exclude<FenceCheck, { ok: true }>, raw: unknown): void {
  if (verdict.status === 409)
    reply(res, 409, { error: verdict.reason, token: String(raw), highWater: verdict.highWater.toString() });
  else reply(res, 400, { error: verdict.reason });
}

/**
 * httpGuard returns a middleware that fences each request: it parses the token (400, naming the
 * header and the value, for a missing or malformed one), enters the critical section of the mark
 * (the lock's by default, see HttpGuardOptions.scope) and answers 409 to a stale token (the body
 * names the token and the mark) without calling `next`; or it calls `next`, and when the handler
 * ends the response (`res.end`) it commits the token if `succeeded(res)` and leaves the section.
 * So requests with different tokens are handled one at a time per mark (the same token's
 * requests together), and a handler that never ends its response holds the mark up — after its
 * client disconnected too, unless `abandonAfterMs` is set. A handler that throws synchronously
 * gets a 500 and no commit. The accepted token is `fencingTokenOf(req)`. Throws RangeError for
 * contradictory options.
 */
export function httpGuard(book: FenceBook, opts: HttpGuardOptions = {}): HttpMiddleware {
  const header = opts.header ?? 'fencing-token';
  const lookup = header.toLowerCase();
  const scope = opts.scope ?? (opts.resource === undefined ? 'lock' : 'resource');
  if (scope !== 'lock' && scope !== 'resource')
    throw new RangeError(`scope must be 'lock' or 'resource', got ${JSON.stringify(scope)}`);
  if (scope === 'lock' && (opts.resource !== undefined || opts.caseInsensitive !== undefined))
    throw new RangeError("resource and caseInsensitive go with scope 'resource'");
  if (scope === 'resource' && opts.lock !== undefined) throw new RangeError("lock goes with scope 'lock'");
  const lock = opts.lock ?? 'default';
  if (lock === '') throw new RangeError('lock must not be empty');
  const lockMark = `${LOCK_MARK_PREFIX}${lock}`;
  const normalize: NormalizeOptions = { caseInsensitive: opts.caseInsensitive === true };
  const resourceOf = opts.resource ?? ((req: IncomingMessage) => defaultResource(req, normalize));
  const nameOf = (req: IncomingMessage): string => {
    if (scope === 'lock') return lockMark;
    const name = resourceOf(req);
    if (name.startsWith('fencepost:')) throw new Error('resource names under fencepost: are reserved for lock marks');
    return name;
  };
  const succeeded = opts.succeeded ?? ((res: ServerResponse) => res.statusCode < 400);
  const abandonAfterMs = opts.abandonAfterMs;
  if (abandonAfterMs !== undefined && !(abandonAfterMs >= 0))
    throw new RangeError(`abandonAfterMs must be a non-negative number, got ${abandonAfterMs}`);
  return (req, res, next) => {
    let name: string;
    try {
      name = nameOf(req);
    } catch (err) {
      reply(res, 400, {
        error: `cannot name the fenced resource of ${JSON.stringify((req.url ?? '').slice(0, 80))}: ${err instanceof Error ? err.message : String(err)}`,
      });
      return;
    }
    // The token first: a malformed one needs no section, nor does a stale one (marks never go down).
    const first = book.check(name, req.headers[lookup], header);
    if (!first.ok) {
      refuse(res, first, req.headers[lookup]);
      return;
    }
    void book
      .enter(name, first.token)
      .then((leave) => {
        let verdict: FenceCheck;
        try {
          verdict = book.check(name, req.headers[lookup], header);
          if (!verdict.ok) refuse(res, verdict, req.headers[lookup]);
        } catch (err) {
          leave();
          throw err;
        }
        if (!verdict.ok) {
          leave();
          return;
        }
        const token = verdict.token;
        tokens.set(req, token);
        const abort = new AbortController();
        signals.set(req, abort.signal);
        let settled = false;
        let abandoned = false;
        let abandon: NodeJS.Timeout | undefined;
        const settle = (commit: boolean): void => {
          if (settled) return;
          settled = true;
          if (abandon !== undefined) clearTimeout(abandon);
          if (commit) book.commit(name, token);
          leave();
        };
        // The handler's verdict is the response it ends: commit (or not) at res.end, before the
        // client can see the answer, and then let the next request on the mark in.
        const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
        res.end = ((...args: unknown[]) => {
          let ok = false;
          try {
            ok = succeeded(res);
          } finally {
            // An abandoned handler that ends with success after all: its write happened, so its
            // token still raises the mark (max: it never lowers one).
            if (abandoned && ok) book.commit(name, token);
            settle(ok);
          }
          return end(...args);
        }) as ServerResponse['end'];
        res.once('close', () => {
          // The connection went away before the handler ended the response: it may still be
          // writing, so keep the section until it ends (or, with abandonAfterMs, give up).
          if (settled || abandonAfterMs === undefined) return;
          abandon = setTimeout(() => {
            abandoned = true;
            abort.abort(new Error(`fencing: handler abandoned ${abandonAfterMs} ms after its client left`));
            settle(false);
          }, abandonAfterMs).unref();
        });
        try {
          next();
        } catch (err) {
          // The handler failed: whatever it did, it did not report success, so no commit.
          settle(false);
          if (!res.headersSent) {
            res.statusCode = 500;
            res.end(`handler failed: ${err instanceof Error ? err.message : String(err)}`);
          } else {
            res.destroy(err instanceof Error ? err : new Error(String(err)));
          }
        }
      })
      .catch((err: unknown) => {
        res.destroy(err instanceof Error ? err : new Error(String(err)));
      });
  };
}
