/**
 * Error classification for retry decisions and bounded metric labels.
 *
 * Every predicate here looks through `cause` chains, because the convention at I/O boundaries is to
 * wrap (`new Error('Failed to replace Lease', { cause })`) and the caller that decides "409 → requeue
 * quietly" sits above that boundary. Status codes come from the `ApiError` of our own transport
 * (src/transport/: every binary), and in tests also from the `ApiException` that
 * @kubernetes/client-node's generated APIs throw and the plain `Error` with a numeric `statusCode`
 * that its `Watch` throws when the watch request itself is refused.
 *
 * The classification is structural, so that this module loads no Kubernetes client: an `Error`
 * with a numeric `statusCode`, or with a numeric `code` and a `body` (client-node's
 * `ApiException`), carries an HTTP status; its `body` (a metav1.Status, as an object or as JSON
 * text) carries the reason. Both clients' errors therefore classify identically.
 */

/**
 * TerminalError marks a failure that retrying cannot fix (a spec that passed admission but cannot be
 * acted on, e.g. a lock asking for a fencing backend the controller was started without). The
 * controller does not requeue it; the reconciler reports it in a condition and waits for the object
 * (or something mapped to it) to change.
 *
 * Throw it (or wrap it as a `cause`) instead of returning a result, so the error is never swallowed.
 */
export class TerminalError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TerminalError';
  }
}

/**
 * ERROR_KINDS is every value {@link errorKind} can return, for pre-initialising metric series.
 *
 * Meanings: `terminal` a {@link TerminalError}; `not_found` 404; `conflict` 409 stale
 * resourceVersion; `already_exists` 409 on create; `gone` 410 (watch resourceVersion too old);
 * `throttled` 429 (API Priority and Fairness); `forbidden` 401/403 (usually RBAC);
 * `invalid` 400/422; `timeout` server-side 504/timeouts and client-side request timeouts;
 * `server_error` other 5xx; `client_error` other 4xx; `connection` refused/reset/DNS failures;
 * `unknown` everything else.
 */
export const ERROR_KINDS = Object.freeze([
  'terminal',
  'not_found',
  'conflict',
  'already_exists',
  'gone',
  'throttled',
  'forbidden',
  'invalid',
  'timeout',
  'server_error',
  'client_error',
  'connection',
  'unknown',
] as const);

/** ErrorKind is a bounded metric label value for an error; see {@link ERROR_KINDS}. */
export type ErrorKind = (typeof ERROR_KINDS)[number];

/**
 * isTerminal reports whether `err` or any error in its cause chain is a {@link TerminalError}.
 */
export function isTerminal(err: unknown): boolean {
  return causes(err).some((e) => e instanceof TerminalError);
}

/**
 * isNotFound reports a 404 from the API server (Status reason `NotFound`, or HTTP 404 without a
 * recognised reason), anywhere in the cause chain. Reconcilers treat it as "the object is gone".
 */
export function isNotFound(err: unknown): boolean {
  return matchesStatus(err, 'NotFound', 404);
}

/**
 * isConflict reports an optimistic-concurrency failure: Status reason `Conflict`, or HTTP 409
 * without a recognised reason (client-go `IsConflict`). It is deliberately false for
 * `AlreadyExists`, which is also HTTP 409 but means something else; see {@link isAlreadyExists}.
 */
export function isConflict(err: unknown): boolean {
  return matchesStatus(err, 'Conflict', 409);
}

/**
 * isAlreadyExists reports a create that lost to an existing object (Status reason `AlreadyExists`,
 * HTTP 409). With deterministic object names that is success: read the object and carry on.
 *
 * Caveat: it needs the Status body to tell this apart from a conflict; a 409 whose body is missing
 * or unparsable counts as {@link isConflict}, as in client-go.
 */
export function isAlreadyExists(err: unknown): boolean {
  return causes(err).some((e) => statusReason(e) === 'AlreadyExists');
}

/**
 * isGone reports HTTP 410 (Status reason `Gone` or `Expired`): the resourceVersion a watch or list
 * continued from has been compacted away, and the only recovery is a fresh list.
 */
export function isGone(err: unknown): boolean {
  return causes(err).some((e) => {
    const reason = statusReason(e);
    return reason === 'Gone' || reason === 'Expired' || httpStatus(e) === 410;
  });
}

/**
 * isInvalid reports HTTP 422 (Status reason `Invalid`), for example a JSON Patch whose `test`
 * failed: the object is not what the patch was made against.
 */
export function isInvalid(err: unknown): boolean {
  return matchesStatus(err, 'Invalid', 422);
}

/**
 * isTooManyRequests reports HTTP 429 (Status reason `TooManyRequests`): the API server is shedding
 * load. Back off; never retry immediately.
 */
export function isTooManyRequests(err: unknown): boolean {
  return matchesStatus(err, 'TooManyRequests', 429);
}

/**
 * httpStatus returns the HTTP status an error carries itself (not its causes), or `undefined`.
 *
 * Recognises any `Error` with a numeric `statusCode` in 100–599 (the transport's `ApiError`,
 * client-node's `Watch`) and any `Error` with a numeric `code` in that range and a `body`
 * property (client-node's `ApiException`; Node's system errors have string codes). Structural,
 * so it also holds when two copies of client-node are loaded.
 */
export function httpStatus(err: unknown): number | undefined {
  if (!(err instanceof Error)) return undefined;
  if ('statusCode' in err && isHttpStatus(err.statusCode)) return err.statusCode;
  if ('body' in err && 'code' in err && isHttpStatus(err.code)) return err.code;
  return undefined;
}

function isHttpStatus(code: unknown): code is number {
  return typeof code === 'number' && Number.isInteger(code) && code >= 100 && code <= 599;
}

/**
 * errorKind maps any thrown value to one of {@link ERROR_KINDS}, for the `error_kind` metric label
 * (bounded cardinality; never put messages or object names in labels).
 *
 * The outermost classifiable error in the cause chain wins, so a {@link TerminalError} wrapping a 422
 * is `terminal`, and a plain wrapper around a 409 is `conflict`.
 */
export function errorKind(err: unknown): ErrorKind {
  for (const e of causes(err)) {
    const kind = kindOf(e);
    if (kind !== undefined) return kind;
  }
  return 'unknown';
}

/** MAX_CAUSE_DEPTH bounds cause-chain walks; real chains are 2–4 deep, and this stops cycles. */
const MAX_CAUSE_DEPTH = 16;

/**
 * KNOWN_REASONS are the metav1 StatusReasons client-go treats as authoritative: when one of these is
 * present, the HTTP code is not consulted (so a 409 `AlreadyExists` is not a conflict).
 */
const KNOWN_REASONS: ReadonlySet<string> = new Set([
  'Unauthorized',
  'Forbidden',
  'NotFound',
  'AlreadyExists',
  'Conflict',
  'Gone',
  'Invalid',
  'ServerTimeout',
  'StoreReadError',
  'Timeout',
  'TooManyRequests',
  'BadRequest',
  'MethodNotAllowed',
  'NotAcceptable',
  'RequestEntityTooLarge',
  'UnsupportedMediaType',
  'InternalError',
  'Expired',
  'ServiceUnavailable',
]);

/** TIMEOUT_CODES are Node and undici error codes for a request that ran out of time. */
const TIMEOUT_CODES: ReadonlySet<string> = new Set([
  'ETIMEDOUT',
  'ESOCKETTIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

/** CONNECTION_CODES are Node and undici error codes for a peer we could not reach or talk to. */
const CONNECTION_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);

function kindOf(e: unknown): ErrorKind | undefined {
  if (e instanceof TerminalError) return 'terminal';
  const status = httpStatus(e);
  if (status !== undefined) return kindOfStatus(status, statusReason(e));
  if (!(e instanceof Error)) return undefined;
  // DOMException from AbortSignal.timeout(), which client-node's Watch and fetch use.
  if (e.name === 'TimeoutError') return 'timeout';
  // ioredis rejects queued commands with this once its reconnect budget is spent.
  if (e.name === 'MaxRetriesPerRequestError') return 'connection';
  const code = 'code' in e ? e.code : undefined;
  if (typeof code === 'string') {
    if (TIMEOUT_CODES.has(code)) return 'timeout';
    if (CONNECTION_CODES.has(code)) return 'connection';
  }
  return undefined;
}

function kindOfStatus(status: number, reason: string | undefined): ErrorKind {
  switch (reason) {
    case 'NotFound':
      return 'not_found';
    case 'AlreadyExists':
      return 'already_exists';
    case 'Conflict':
      return 'conflict';
    case 'Gone':
    case 'Expired':
      return 'gone';
    case 'TooManyRequests':
      return 'throttled';
    case 'Timeout':
    case 'ServerTimeout':
      return 'timeout';
    default:
      break;
  }
  switch (status) {
    case 400:
    case 422:
      return 'invalid';
    case 401:
    case 403:
      return 'forbidden';
    case 404:
      return 'not_found';
    case 409:
      return 'conflict';
    case 410:
      return 'gone';
    case 429:
      return 'throttled';
    case 504:
      return 'timeout';
    default:
      if (status >= 500) return 'server_error';
      if (status >= 400) return 'client_error';
      return 'unknown';
  }
}

/** matchesStatus is client-go's reasonAndCodeForError test: the reason if known, else the code. */
function matchesStatus(err: unknown, reason: string, code: number): boolean {
  return causes(err).some((e) => {
    const status = httpStatus(e);
    if (status === undefined) return false;
    const actual = statusReason(e);
    if (actual === reason) return true;
    return (actual === undefined || !KNOWN_REASONS.has(actual)) && status === code;
  });
}

/**
 * statusReason extracts `reason` from the metav1.Status body of an error that carries an HTTP
 * status ({@link httpStatus}). client-node stores the raw response text there and the transport
 * the parsed Status, so it may be a JSON string, an object, or undefined (401s).
 */
function statusReason(e: unknown): string | undefined {
  if (!(e instanceof Error) || !('body' in e) || httpStatus(e) === undefined) return undefined;
  let body: unknown = e.body;
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body);
    } catch {
      // Not JSON (an HTML error page from a proxy): no reason, fall back to the code.
      return undefined;
    }
  }
  if (typeof body === 'object' && body !== null && 'reason' in body && typeof body.reason === 'string') {
    return body.reason === '' ? undefined : body.reason;
  }
  return undefined;
}

/** causes lists `err` followed by its `cause` chain, bounded by MAX_CAUSE_DEPTH and cycle-safe. */
function causes(err: unknown): unknown[] {
  const chain: unknown[] = [];
  let current: unknown = err;
  while (current !== undefined && current !== null && chain.length < MAX_CAUSE_DEPTH && !chain.includes(current)) {
    chain.push(current);
    current = current instanceof Error ? current.cause : undefined;
  }
  return chain;
}
