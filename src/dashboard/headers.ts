/**
 * The headers every dashboard response carries, and the Host check. Pure.
 *
 * The page is one HTML file with no inline script or style (CSS and JS are served as files), so
 * the Content-Security-Policy can allow only this origin's files and refuse everything else:
 * inline code, eval, other origins, frames, forms, plugins.
 */

/** CONTENT_SECURITY_POLICY: only same-origin scripts, styles, images and connections (the SSE stream). */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** SECURITY_HEADERS go on every response, errors included. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
});

/** isLoopbackHost: the address is one of this machine's loopback addresses (127.0.0.0/8, ::1, localhost). */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h) || h === '::ffff:127.0.0.1';
}

/**
 * hostAllowed: a request's Host header names this server by a loopback name. Checked only while
 * the server listens on loopback, against DNS rebinding: a web page on another site whose name
 * is made to resolve to 127.0.0.1 would otherwise read the cluster through the user's browser.
 * The browser sends that site's name as Host, which this refuses.
 */
export function hostAllowed(hostHeader: string | undefined, port: number): boolean {
  if (hostHeader === undefined) return false;
  const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(hostHeader);
  if (m === null) return false;
  const p = m[2] !== undefined ? Number(m[2]) : 80;
  return p === port && isLoopbackHost(m[1] ?? '');
}
