/**
 * Errors of the agent's HTTP API as RFC 9457 problem details (`application/problem+json`): `type`
 * (a URI naming the kind of problem; an identifier, not fetched), `title` (the same for every
 * problem of the type), `status`, `detail` (this occurrence), plus extension members. The types
 * are a closed set, listed in the OpenAPI document and in docs/agent.md.
 */
import type { ServerResponse } from 'node:http';

/** PROBLEM_BASE prefixes every problem type URI. */
const PROBLEM_BASE = 'https://fencepost.io/problems/';

/** PROBLEMS: each problem type with its status and title. */
export const PROBLEMS = {
  /** The lock was not granted to this pod within `wait`; the request stays queued (Mutex). */
  'not-granted': { status: 423, title: 'Lock not granted within the wait' },
  /**
   * acquire with `ifHeld=fail`: another pod holds the lock (when asked, or was granted it while
   * this pod waited). Nothing of the request is left queued.
   */
  held: { status: 423, title: 'Lock held by another pod' },
  /**
   * The run id of an acquire was already reported completed (before the request, or while this
   * pod waited: then the term was released again). Permanent for that run id: do not run it.
   */
  'already-done': { status: 409, title: 'Run already completed' },
  /** A complete call whose token is not the term this pod holds now (lost, released, or never held). */
  'not-held': { status: 409, title: 'Lock not held with this token' },
  /** A drained call while no planned handover of the lock is under way on this pod. */
  'not-draining': { status: 409, title: 'No planned handover under way' },
  'invalid-parameter': { status: 400, title: 'Invalid query parameter' },
  /** The Host header names no loopback name of this agent (local-only.ts): DNS rebinding, or a misaddressed request. */
  'foreign-host': { status: 403, title: 'Host is not a loopback name of this agent' },
  /** The request carries Origin, or Sec-Fetch-Site other than none (local-only.ts): a web page sent it. */
  'browser-request': { status: 403, title: 'Requests from web browsers are refused' },
  /** A POST without Content-Type: application/json and a JSON object body (local-only.ts). */
  'json-body-required': { status: 415, title: 'POST requires Content-Type: application/json and a JSON object body' },
  /** The request target is not a path this server can read (malformed percent-encoding, not a URL). */
  'invalid-request': { status: 400, title: 'Malformed request' },
  /** The handler failed unexpectedly; the agent keeps serving (the error is logged). */
  'internal-error': { status: 500, title: 'Internal error' },
  'unknown-lock': { status: 404, title: 'Lock not managed by this agent' },
  'no-route': { status: 404, title: 'No such endpoint' },
  'method-not-allowed': { status: 405, title: 'Method not allowed' },
  /** The Kubernetes API server did not take a write (the pod's request annotation, the Lease release). */
  'kubernetes-unavailable': { status: 502, title: 'Kubernetes API request failed' },
} as const;

/** ProblemType is a key of PROBLEMS. */
export type ProblemType = keyof typeof PROBLEMS;

/** Problem is an RFC 9457 problem details object. */
export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly [extension: string]: unknown;
}

/** problem builds the problem details of a type with a detail and extension members. */
export function problem(
  type: ProblemType,
  detail: string,
  extensions: Readonly<Record<string, unknown>> = {},
): Problem {
  const p = PROBLEMS[type];
  return { ...extensions, type: `${PROBLEM_BASE}${type}`, title: p.title, status: p.status, detail };
}

/** sendProblem writes a problem as the response (headers: extra ones such as `allow`). */
export function sendProblem(res: ServerResponse, p: Problem, headers: Readonly<Record<string, string>> = {}): void {
  res.writeHead(p.status, { ...headers, 'content-type': 'application/problem+json' }).end(`${JSON.stringify(p)}\n`);
}
