import { describe, it, expect } from 'vitest';
import { ApiException } from '@kubernetes/client-node';
import {
  ERROR_KINDS,
  TerminalError,
  errorKind,
  httpStatus,
  isAlreadyExists,
  isConflict,
  isGone,
  isNotFound,
  isTerminal,
  isTooManyRequests,
} from '../../../src/runtime/errors.ts';
import type { ErrorKind } from '../../../src/runtime/errors.ts';
import { ApiError } from '../../../src/transport/client.ts';

/** apiError builds what client-node's generated APIs throw: the Status body as raw response text. */
function apiError(code: number, reason?: string): ApiException<string | undefined> {
  const status = { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason, code };
  const body = reason === undefined ? undefined : JSON.stringify(status);
  return new ApiException(code, 'Unknown API Status Code!', body, {});
}

/** watchError builds what client-node's Watch throws when the watch request is refused. */
function watchError(statusCode: number): Error {
  return Object.assign(new Error('Gone'), { statusCode });
}

function systemError(code: string): Error {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:6443`), { code });
}

/** fetchFailed builds undici's rejection for a network failure: a TypeError wrapping the cause. */
function fetchFailed(code: string): Error {
  return new TypeError('fetch failed', { cause: systemError(code) });
}

const wrap = (cause: unknown): Error => new Error('Failed to replace Lease', { cause });

describe('status predicates', () => {
  type Predicate = 'isNotFound' | 'isConflict' | 'isAlreadyExists' | 'isGone' | 'isTooManyRequests';
  const predicates: Record<Predicate, (e: unknown) => boolean> = {
    isNotFound,
    isConflict,
    isAlreadyExists,
    isGone,
    isTooManyRequests,
  };
  const cases: { name: string; err: unknown; want: Predicate[] }[] = [
    { name: 'a 404 NotFound is not found', err: apiError(404, 'NotFound'), want: ['isNotFound'] },
    { name: 'a 404 without a body is not found', err: apiError(404), want: ['isNotFound'] },
    { name: 'a 409 Conflict is a conflict', err: apiError(409, 'Conflict'), want: ['isConflict'] },
    {
      name: 'a 409 AlreadyExists is not a conflict',
      err: apiError(409, 'AlreadyExists'),
      want: ['isAlreadyExists'],
    },
    { name: 'a 409 without a body counts as a conflict', err: apiError(409), want: ['isConflict'] },
    {
      name: 'a 409 with an unrecognised reason counts as a conflict',
      err: apiError(409, 'SomethingNew'),
      want: ['isConflict'],
    },
    {
      name: 'a 409 with a non-JSON body counts as a conflict',
      err: new ApiException(409, 'x', '<html>proxy error</html>', {}),
      want: ['isConflict'],
    },
    { name: 'a 410 Gone is gone', err: apiError(410, 'Gone'), want: ['isGone'] },
    { name: 'a 410 Expired is gone', err: apiError(410, 'Expired'), want: ['isGone'] },
    { name: 'a refused watch with status 410 is gone', err: watchError(410), want: ['isGone'] },
    { name: 'a 429 is too many requests', err: apiError(429, 'TooManyRequests'), want: ['isTooManyRequests'] },
    { name: 'a 500 matches nothing', err: apiError(500, 'InternalError'), want: [] },
    { name: 'a 403 matches nothing', err: apiError(403, 'Forbidden'), want: [] },
    { name: 'a wrapped 404 is still not found', err: wrap(apiError(404, 'NotFound')), want: ['isNotFound'] },
    {
      name: 'a doubly wrapped 409 is still a conflict',
      err: wrap(wrap(apiError(409, 'Conflict'))),
      want: ['isConflict'],
    },
    { name: 'a plain error matches nothing', err: new Error('boom'), want: [] },
    { name: 'a thrown string matches nothing', err: '404', want: [] },
    { name: 'an object shaped like ApiException matches nothing', err: { code: 404 }, want: [] },
    { name: 'undefined matches nothing', err: undefined, want: [] },
  ];
  it.each(cases)('$name', ({ err, want }) => {
    const matched = (Object.keys(predicates) as Predicate[]).filter((p) => predicates[p](err));
    expect(matched).toEqual(want);
  });
});

describe('TerminalError', () => {
  it('is an Error named TerminalError that keeps its cause', () => {
    const cause = apiError(422, 'Invalid');
    const err = new TerminalError('spec.leaseDurationSeconds must be positive', { cause });
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('TerminalError');
    expect(err.cause).toBe(cause);
  });

  it.each([
    { name: 'a TerminalError is terminal', err: new TerminalError('bad spec'), want: true },
    { name: 'a wrapped TerminalError is terminal', err: wrap(new TerminalError('bad spec')), want: true },
    { name: 'an API error is not terminal', err: apiError(422, 'Invalid'), want: false },
    { name: 'a plain error is not terminal', err: new Error('boom'), want: false },
  ])('$name', ({ err, want }) => {
    expect(isTerminal(err)).toBe(want);
  });
});

describe('httpStatus', () => {
  it.each([
    { name: 'reads an ApiException code', err: apiError(503), want: 503 },
    { name: 'reads a watch error statusCode', err: watchError(410), want: 410 },
    { name: 'ignores a statusCode outside HTTP range', err: watchError(7), want: undefined },
    { name: 'ignores string codes of system errors', err: systemError('ECONNREFUSED'), want: undefined },
    { name: 'does not look into causes', err: wrap(apiError(404)), want: undefined },
  ])('$name', ({ err, want }) => {
    expect(httpStatus(err)).toBe(want);
  });
});

describe('errorKind', () => {
  const cases: { name: string; err: unknown; want: ErrorKind }[] = [
    { name: 'a TerminalError is terminal', err: new TerminalError('bad spec'), want: 'terminal' },
    {
      name: 'a TerminalError wrapping an API error is terminal',
      err: new TerminalError('bad', { cause: apiError(422) }),
      want: 'terminal',
    },
    { name: 'a 404 is not_found', err: apiError(404, 'NotFound'), want: 'not_found' },
    { name: 'a 409 Conflict is conflict', err: apiError(409, 'Conflict'), want: 'conflict' },
    { name: 'a 409 without a reason is conflict', err: apiError(409), want: 'conflict' },
    { name: 'a 409 AlreadyExists is already_exists', err: apiError(409, 'AlreadyExists'), want: 'already_exists' },
    { name: 'a 410 is gone', err: apiError(410, 'Expired'), want: 'gone' },
    { name: 'a refused watch with 410 is gone', err: watchError(410), want: 'gone' },
    { name: 'a 429 is throttled', err: apiError(429, 'TooManyRequests'), want: 'throttled' },
    { name: 'a 401 is forbidden', err: apiError(401), want: 'forbidden' },
    { name: 'a 403 is forbidden', err: apiError(403, 'Forbidden'), want: 'forbidden' },
    { name: 'a 422 is invalid', err: apiError(422, 'Invalid'), want: 'invalid' },
    { name: 'a 400 is invalid', err: apiError(400, 'BadRequest'), want: 'invalid' },
    { name: 'a 415 is client_error', err: apiError(415, 'UnsupportedMediaType'), want: 'client_error' },
    { name: 'a 504 is timeout', err: apiError(504, 'Timeout'), want: 'timeout' },
    { name: 'a 500 ServerTimeout is timeout', err: apiError(500, 'ServerTimeout'), want: 'timeout' },
    { name: 'a 500 InternalError is server_error', err: apiError(500, 'InternalError'), want: 'server_error' },
    { name: 'a 503 is server_error', err: apiError(503, 'ServiceUnavailable'), want: 'server_error' },
    { name: 'a refused connection is connection', err: fetchFailed('ECONNREFUSED'), want: 'connection' },
    { name: 'a reset connection is connection', err: fetchFailed('ECONNRESET'), want: 'connection' },
    { name: 'a DNS failure is connection', err: fetchFailed('ENOTFOUND'), want: 'connection' },
    { name: 'an undici socket error is connection', err: fetchFailed('UND_ERR_SOCKET'), want: 'connection' },
    { name: 'a bare system error is connection', err: systemError('EPIPE'), want: 'connection' },
    {
      name: 'an exhausted Redis retry budget is connection',
      err: Object.assign(new Error('Reached the max retries per request limit'), { name: 'MaxRetriesPerRequestError' }),
      want: 'connection',
    },
    { name: 'a connect timeout is timeout', err: fetchFailed('UND_ERR_CONNECT_TIMEOUT'), want: 'timeout' },
    { name: 'a socket timeout is timeout', err: systemError('ETIMEDOUT'), want: 'timeout' },
    {
      name: 'an AbortSignal.timeout() abort is timeout',
      err: new DOMException('The operation timed out', 'TimeoutError'),
      want: 'timeout',
    },
    { name: 'a wrapped API error takes the inner kind', err: wrap(apiError(409, 'Conflict')), want: 'conflict' },
    { name: 'a plain error is unknown', err: new Error('boom'), want: 'unknown' },
    { name: 'an AbortError is unknown', err: new DOMException('aborted', 'AbortError'), want: 'unknown' },
    { name: 'a thrown string is unknown', err: 'boom', want: 'unknown' },
    { name: 'null is unknown', err: null, want: 'unknown' },
  ];
  it.each(cases)('$name', ({ err, want }) => {
    expect(errorKind(err)).toBe(want);
  });

  it('stops at a cause cycle', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    a.cause = b;
    expect(errorKind(a)).toBe('unknown');
    expect(isNotFound(a)).toBe(false);
  });

  it('only ever returns a declared kind', () => {
    for (const { err } of cases) expect(ERROR_KINDS).toContain(errorKind(err));
  });
});

describe("the transport's ApiError and client-node's ApiException classify identically", () => {
  /** transportError builds what src/transport/client.ts throws: the parsed Status, or the text when it is not JSON. */
  const transportError = (code: number, reason?: string): ApiError =>
    new ApiError('PUT', '/apis/coordination.k8s.io/v1/namespaces/ns/leases/x', code, {
      kind: 'Status',
      status: 'Failure',
      ...(reason !== undefined ? { reason } : {}),
      code,
    });
  const classify = (err: unknown) => ({
    status: httpStatus(err),
    kind: errorKind(err),
    notFound: isNotFound(err),
    conflict: isConflict(err),
    alreadyExists: isAlreadyExists(err),
    gone: isGone(err),
    tooMany: isTooManyRequests(err),
  });
  it.each([
    [404, 'NotFound'],
    [404, undefined],
    [409, 'Conflict'],
    [409, 'AlreadyExists'],
    [409, undefined],
    [410, 'Expired'],
    [410, 'Gone'],
    [422, 'Invalid'],
    [429, 'TooManyRequests'],
    [403, 'Forbidden'],
    [500, 'InternalError'],
    [504, 'Timeout'],
  ] as [number, string | undefined][])('HTTP %i %s', (code, reason) => {
    expect(classify(transportError(code, reason))).toEqual(classify(apiError(code, reason)));
    expect(classify(wrap(transportError(code, reason)))).toEqual(classify(wrap(apiError(code, reason))));
  });

  it('a non-JSON body (a proxy page) falls back to the code, as for ApiException', () => {
    const proxyPage = new ApiError('PUT', '/x', 409, '<html>proxy error</html>');
    expect(isConflict(proxyPage)).toBe(true);
    expect(errorKind(proxyPage)).toBe('conflict');
  });

  it('an Error with a numeric code but no body is not an HTTP error', () => {
    expect(httpStatus(Object.assign(new Error('x'), { code: 404 }))).toBeUndefined();
  });
});
