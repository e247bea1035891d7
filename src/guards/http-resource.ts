/**
 * http-resource.ts — the HTTP guard's resource names (http-guard.ts): one name for every spelling
 * of a URL path that routers treat as one resource, so that a stale holder cannot slip past the
 * guard's mark by writing the same resource under another spelling.
 */
import type { IncomingMessage } from 'node:http';

/** NormalizeOptions tunes normalizeResource. */
export interface NormalizeOptions {
  /** caseInsensitive folds the result to lower case (default false: paths are case-sensitive). */
  readonly caseInsensitive?: boolean;
}

// Bytes that keep their percent-encoding: '/', '\', '?', '#' and '%' would change the path's
// structure if decoded; controls and DEL are not path characters.
const KEEP_ENCODED = new Set([0x2f, 0x5c, 0x3f, 0x23, 0x25, 0x7f]);
const utf8 = new TextDecoder('utf-8', { fatal: true });

function decodeRun(run: string): string {
  const bytes = Buffer.from(run.replace(/%/g, ''), 'hex');
  let out = '';
  const encoded = (b: number): string => `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  for (let i = 0; i < bytes.length;) {
    const b = bytes[i] ?? 0;
    if (b < 0x80) {
      out += b <= 0x20 || KEEP_ENCODED.has(b) ? encoded(b) : String.fromCharCode(b);
      i++;
      continue;
    }
    // A UTF-8 sequence: decode it whole when valid, else keep its bytes encoded.
    let j = i + 1;
    while (j < bytes.length && (bytes[j] ?? 0) >= 0x80) j++;
    try {
      out += utf8.decode(bytes.subarray(i, j));
    } catch {
      for (const x of bytes.subarray(i, j)) out += encoded(x);
    }
    i = j;
  }
  return out;
}

/**
 * normalizeResource maps the spellings of a URL path that routers treat as one to one name:
 * percent-encodings are decoded (`%34%32` is `42`, `%7e` is `~`), except those of `/`, `\`, `?`,
 * `#`, `%`, space, controls and invalid UTF-8, which stay (or become) encoded with upper-case hex; runs of slashes
 * (and backslashes, slashes to the WHATWG URL parser) become one; dot segments are removed (also
 * encoded ones, `%2E%2E`); a trailing slash is dropped (`/orders/42/` is `/orders/42`; `/` stays);
 * then the WHATWG URL parser re-encodes what it encodes (space, quotes, `<>{}` and non-ASCII).
 * With `caseInsensitive` the result is lower-cased. Merging spellings is the safe direction: two
 * names that are one resource let a stale holder through, one name for two resources only makes
 * their writers share a mark.
 */
export function normalizeResource(path: string, opts: NormalizeOptions = {}): string {
  let p = path.replace(/(?:%[0-9A-Fa-f]{2})+/g, decodeRun);
  // The URL parser drops tabs and newlines and trims spaces and controls at the ends: encode them.
  p = [...p]
    .map((ch) => (ch <= ' ' || ch === '\x7f' ? `%${ch.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}` : ch))
    .join('');
  p = p.replace(/[/\\]+/g, '/');
  if (!p.startsWith('/')) p = `/${p}`;
  p = new URL(`http://localhost${p}`).pathname;
  // The parser may leave a run of slashes where dot segments were removed ('/a/./' → '/a/').
  p = p.replace(/\/{2,}/g, '/');
  if (p.length > 1 && p.endsWith('/')) p = p.slice(0, -1);
  return opts.caseInsensitive === true ? p.toLowerCase() : p;
}

/**
 * defaultResource is the request's URL path without query or fragment, normalised by
 * normalizeResource; `//a` is a path, never a host, and `*` (OPTIONS *) stays `*`.
 */
export function defaultResource(req: IncomingMessage, opts: NormalizeOptions = {}): string {
  const url = req.url ?? '/';
  if (url === '*') return '*';
  const path = url.startsWith('/') ? (url.split(/[?#]/, 1)[0] ?? '/') : new URL(url).pathname;
  return normalizeResource(path, opts);
}
