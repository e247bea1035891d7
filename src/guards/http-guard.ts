/**
 * The HTTP fencing guard: a service that owns a resource refuses requests whose `Fencing-Token`
 * header is below the highest token it has seen succeed for that resource.
 *
 * Two phases, because the mark may be raised only by a write that actually happened (otherwise a
 * request with a forged huge token that then fails, say at authorisation, would lock every real
 * holder out):
 * 1. `book.check(resource, header)` — is the token well formed and not below the mark? Changes
 *    nothing.
 * 2. the handler performs the write;
 * 3. `book.commit(resource, token)` — only if the write succeeded: raise the mark. The
 *    middleware commits when the handler ends its response with a success status (`res.end`,
 *    not the 'finish' event, which never fires when the client has gone away meanwhile).
 *
 * Check, write and commit must not interleave with another request on the same resource (token 6
 * checked, token 5 checked, 6 written, 5 written would let the stale holder win), so they run
 * inside `book.enter(resource)`, a per-resource FIFO critical section. `httpGuard` (the
 * middleware) and `book.guarded` do all of that; use `check`/`commit` directly only inside
 * `enter`.
 *
 * The marks live in this process's memory: they are lost on restart and not shared between
 * replicas of the service. Persist them (`snapshot`, `new FenceBook({ initial })`) or use the
 * Redis or SQL guard, whose mark lives with the data, when either matters.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseToken, TokenError } from '../protocol/token.ts';

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

/**
 * FenceBook keeps one high-water mark per resource name, in memory. `check` is pure; only
 * `commit` raises a mark, and never lowers one. Resource names are compared exactly: map every
 * spelling of a resource to one name, or a stale holder can write through an alias.
 */
export class FenceBook {
  readonly #marks = new Map<string, bigint>();
  readonly #tails = new Map<string, Promise<void>>();

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
   * enter waits for the resource's critical section (FIFO) and returns the function that leaves
   * it; call it exactly once, also on errors (further calls do nothing). A holder that never
   * leaves blocks the resource.
   */
  async enter(resource: string): Promise<() => void> {
    const previous = this.#tails.get(resource) ?? Promise.resolve();
    let leave: () => void = () => undefined;
    const mine = new Promise<void>((resolve) => {
      leave = resolve;
    });
    const tail = previous.then(() => mine);
    this.#tails.set(resource, tail);
    await previous;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      leave();
      if (this.#tails.get(resource) === tail) this.#tails.delete(resource);
    };
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
  /** resource names the fenced resource of a request (default: the URL path, without query). */
  readonly resource?: (req: IncomingMessage) => string;
  /** succeeded tells, when the handler ends the response, whether its write happened
   *  (default: status below 400). */
  readonly succeeded?: (res: ServerResponse) => boolean;
  /** abandonAfterMs: when the client disconnects before the handler ends the response, how long
   *  to keep the resource for the handler before letting the next request in without a commit
   *  (default 30 s). */
  readonly abandonAfterMs?: number;
}

/** HttpMiddleware is a connect-style handler on plain node:http. */
export type HttpMiddleware = (req: IncomingMessage, res: ServerResponse, next: () => void) => void;

const tokens = new WeakMap<IncomingMessage, bigint>();

/** fencingTokenOf returns the token the guard accepted for this request (undefined if none). */
export function fencingTokenOf(req: IncomingMessage): bigint | undefined {
  return tokens.get(req);
}

/**
 * defaultResource is the request's URL path without the query, as the WHATWG URL parser
 * normalises it (dot segments removed); `//a` stays a path, not a host.
 */
export function defaultResource(req: IncomingMessage): string {
  const url = req.url ?? '/';
  if (url.startsWith('/')) return new URL(`http://localhost${url}`).pathname;
  if (url === '*') return '*';
  return new URL(url).pathname;
}

function reply(res: ServerResponse, status: number, body: Record<string, string>): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/**
 * httpGuard returns a middleware that fences each request: it enters the resource's critical
 * section and answers 400 (missing or malformed token: the body names the header and the value)
 * or 409 (stale: the body names the token and the mark) without calling `next`; or it calls
 * `next`, and when the handler ends the response (`res.end`) it commits the token if
 * `succeeded(res)` and leaves the section. So requests to one resource are handled one at a time,
 * and a handler that never ends its response holds that resource up (after a client disconnect,
 * for at most `abandonAfterMs`; hazard: a handler still writing after that is no longer
 * serialised). A handler that throws synchronously gets a 500 and no commit. The accepted token
 * is available to the handler as `fencingTokenOf(req)`.
 */
export function httpGuard(book: FenceBook, opts: HttpGuardOptions = {}): HttpMiddleware {
  const header = opts.header ?? 'fencing-token';
  const lookup = header.toLowerCase();
  const resourceOf = opts.resource ?? defaultResource;
  const succeeded = opts.succeeded ?? ((res: ServerResponse) => res.statusCode < 400);
  const abandonAfterMs = opts.abandonAfterMs ?? 30_000;
  return (req, res, next) => {
    let resource: string;
    try {
      resource = resourceOf(req);
    } catch (err) {
      reply(res, 400, {
        error: `cannot name the fenced resource of ${JSON.stringify((req.url ?? '').slice(0, 80))}: ${err instanceof Error ? err.message : String(err)}`,
      });
      return;
    }
    void book
      .enter(resource)
      .then((leave) => {
        let verdict: FenceCheck;
        try {
          verdict = book.check(resource, req.headers[lookup], header);
          if (!verdict.ok) {
            if (verdict.status === 409)
              reply(res, 409, {
                error: verdict.reason,
                token: String(req.headers[lookup]),
                highWater: verdict.highWater.toString(),
              });
            else reply(res, 400, { error: verdict.reason });
          }
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
        let settled = false;
        let abandon: NodeJS.Timeout | undefined;
        const settle = (commit: boolean): void => {
          if (settled) return;
          settled = true;
          if (abandon !== undefined) clearTimeout(abandon);
          if (commit) book.commit(resource, token);
          leave();
        };
        // The handler's verdict is the response it ends: commit (or not) at res.end, before the
        // client can see the answer, and then let the next request on the resource in.
        const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
        res.end = ((...args: unknown[]) => {
          let ok = false;
          try {
            ok = succeeded(res);
          } finally {
            settle(ok);
          }
          return end(...args);
        }) as ServerResponse['end'];
        res.once('close', () => {
          // The connection went away before the handler ended the response: it may still be
          // writing, so keep the resource until it ends (or give up, without a commit).
          if (!settled) abandon = setTimeout(() => settle(false), abandonAfterMs).unref();
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
