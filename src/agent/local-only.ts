/**
 * The rules that keep the agent's local API to the pod's own programs, and away from web
 * browsers. Pure: each function takes the request's headers and says what is wrong, or nothing.
 *
 * Listening on loopback is not enough. A browser on the node (hostNetwork pods share the node's
 * loopback), or any page a browser in the pod's network opens, can send requests to
 * 127.0.0.1:7370: a hostile site may POST a form there (a "simple" cross-site request, sent
 * without asking the server first), and by DNS rebinding — its own name made to resolve to
 * 127.0.0.1 — it can even read the answers, because the browser then counts the agent as the
 * site's own origin. Three rules close that:
 *   1. Host must name this agent by a loopback name (`localhost`, 127.0.0.0/8, `[::1]`) or its
 *      configured bind host. A rebound page sends its own name as Host, so reads are refused too.
 *   2. No request from a browser: one carrying `Origin`, or `Sec-Fetch-Site` other than `none`
 *      (a user typing the address), is refused. Programs (curl, the clients, fencepost exec)
 *      send neither.
 *   3. Every POST carries `Content-Type: application/json` and a JSON object as its body (`{}`;
 *      the parameters stay in the query). A browser cannot send that type across sites without
 *      asking first (a CORS preflight this server never answers), and a form can send only
 *      urlencoded, multipart or text/plain bodies.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { problem, type Problem } from './problem.ts';

/** MAX_BODY_BYTES bounds a POST body: the API's bodies are `{}`. */
export const MAX_BODY_BYTES = 4096;

/** isLoopbackName: `localhost`, an address of 127.0.0.0/8, or ::1 (brackets allowed). */
function isLoopbackName(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h);
}

/**
 * hostRefusal: the problem when the Host header does not name this agent (rule 1). The port is
 * not compared: a port-forward or a test bed may reach the agent on another port, and a rebound
 * page's Host fails on its name whatever the port.
 */
export function hostRefusal(headers: IncomingHttpHeaders, bindHost: string): Problem | undefined {
  const host = headers.host;
  const m = host === undefined ? null : /^(\[[^\]]+\]|[^:[\]]+)(?::\d{1,5})?$/.exec(host);
  const name = m?.[1]?.replace(/^\[|\]$/g, '').toLowerCase();
  if (name !== undefined && (isLoopbackName(name) || name === bindHost.toLowerCase())) return undefined;
  return problem(
    'foreign-host',
    `Host ${host === undefined ? '(none)' : JSON.stringify(host.slice(0, 200))} does not name this agent: the local API answers only to localhost, 127.0.0.1, [::1] or its --listen host (a page on another site must not reach it by DNS rebinding)`,
    { rule: 'host' },
  );
}

/** browserRefusal: the problem when the request comes from a web browser (rule 2). */
export function browserRefusal(headers: IncomingHttpHeaders): Problem | undefined {
  const origin = headers.origin;
  if (origin !== undefined)
    return problem(
      'browser-request',
      `the request carries Origin ${JSON.stringify(origin.slice(0, 200))}: the local API refuses requests from web pages`,
      { rule: 'origin' },
    );
  const site = headers['sec-fetch-site'];
  if (site !== undefined && site !== 'none')
    return problem(
      'browser-request',
      `the request carries Sec-Fetch-Site ${JSON.stringify(site.slice(0, 50))}: the local API refuses requests from web pages`,
      { rule: 'sec-fetch-site' },
    );
  return undefined;
}

/** contentTypeRefusal: the problem when a POST does not say its body is JSON (rule 3). */
export function contentTypeRefusal(headers: IncomingHttpHeaders): Problem | undefined {
  const type = headers['content-type'];
  const media = type?.split(';')[0]?.trim().toLowerCase();
  if (media === 'application/json') return undefined;
  return problem(
    'json-body-required',
    `Content-Type ${type === undefined ? '(none)' : JSON.stringify(type.slice(0, 100))} is not application/json: every POST sends Content-Type: application/json and a JSON object body ({}; curl --json '{}')`,
    { rule: 'content-type' },
  );
}

/**
 * bodyRefusal: the problem when a POST's body is not a JSON object without members (rule 3). A
 * member is refused by name rather than ignored: the parameters are read from the query only.
 */
export function bodyRefusal(body: string): Problem | undefined {
  let value: unknown;
  try {
    value = body.trim() === '' ? undefined : (JSON.parse(body) as unknown);
  } catch {
    value = undefined;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return problem(
      'json-body-required',
      `the body ${body.trim() === '' ? 'is empty' : 'is not a JSON object'}: every POST sends a JSON object body ({}; curl --json '{}')`,
      { rule: 'body' },
    );
  const members = Object.keys(value);
  if (members.length > 0)
    return problem(
      'invalid-parameter',
      `body member ${JSON.stringify(members[0])}: the body is {}; parameters go in the query string (e.g. ?${members[0] ?? ''}=…)`,
      { parameter: members[0] },
    );
  return undefined;
}
