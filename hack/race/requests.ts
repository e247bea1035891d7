/**
 * The race page's requests that change something, and who may send them. Pure.
 *
 * Unlike the dashboard, this page acts: it starts workers and stops processes. The dashboard's
 * Host check (against DNS rebinding) is not enough for that: a page on any other site could still
 * POST a form to http://127.0.0.1:PORT, and the browser would send it with a loopback Host. So an
 * action must also come from this page's own origin (the Origin header, which browsers send with
 * every POST and no page can forge) and be JSON (a cross-site form cannot send that type without a
 * CORS preflight, which this server never grants).
 */

/** Action is one thing the page asks the server to do. */
export type Action =
  | { readonly type: 'race' }
  | { readonly type: 'guard'; readonly on: boolean }
  | { readonly type: 'freeze'; readonly seconds: number }
  | { readonly type: 'thaw' };

/** MAX_BODY: the largest request body read (the actions' bodies are a few bytes). */
export const MAX_BODY = 1024;

/**
 * sameOrigin: the Origin header names this server exactly as the Host header does
 * (`http://127.0.0.1:8301` for Host `127.0.0.1:8301`).
 */
export function sameOrigin(origin: string | undefined, host: string | undefined): boolean {
  return origin !== undefined && host !== undefined && origin.toLowerCase() === `http://${host.toLowerCase()}`;
}

/** isJson: the Content-Type is application/json (parameters such as charset allowed). */
export function isJson(contentType: string | undefined): boolean {
  return (contentType ?? '').split(';')[0]?.trim().toLowerCase() === 'application/json';
}

/**
 * parseAction reads `POST /api/<action>` and its JSON body: the action, or an error sentence for a
 * 400 (an unknown path is `undefined`: a 404).
 */
export function parseAction(path: string, body: string): Action | { readonly error: string } | undefined {
  let v: unknown = {};
  if (body.trim() !== '') {
    try {
      v = JSON.parse(body);
    } catch {
      return { error: 'The body is not JSON.' };
    }
  }
  const o = typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {};
  switch (path) {
    case '/api/race':
      return { type: 'race' };
    case '/api/thaw':
      return { type: 'thaw' };
    case '/api/guard':
      return typeof o['on'] === 'boolean' ? { type: 'guard', on: o['on'] } : { error: 'Send {"on": true|false}.' };
    case '/api/freeze': {
      const s = o['seconds'];
      return typeof s === 'number' && Number.isFinite(s)
        ? { type: 'freeze', seconds: s }
        : { error: 'Send {"seconds": N}.' };
    }
    default:
      return undefined;
  }
}
