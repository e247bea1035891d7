/**
 * The page's static files, read once at start and kept in memory with their ETags: the HTML, the
 * stylesheet and the page's ES modules (page/app.ts and what it imports at run time).
 *
 * The modules are TypeScript, type-checked with the rest. From a build (dist/) the compiled `.js`
 * beside this file is served; from a checkout, where Node runs the `.ts` itself, the `.ts` is
 * served with its types stripped by Node's own `stripTypeScriptTypes` (type-only imports vanish,
 * so the browser never asks for them). Its relative imports keep their `.ts` spelling then, so
 * every module answers to both `/assets/NAME.js` and `/assets/NAME.ts`.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import { INDEX_HTML } from './page/index-html.ts';
import { STYLE_CSS } from './page/style-css.ts';

/** ICON_SVG: the page's icon, a padlock (a file, so that img-src 'self' covers it). */
const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect x="2" y="7" width="12" height="8" rx="1" fill="#0a6b2e"/><path d="M5 7V5a3 3 0 0 1 6 0v2" fill="none" stroke="#0a6b2e" stroke-width="2"/></svg>';

/** Asset is one file the server sends. */
export interface Asset {
  readonly body: Buffer;
  readonly type: string;
  readonly etag: string;
}

/** PAGE_MODULES: the page's modules loaded at run time (dom.ts and the wire types are imported as types only). */
const PAGE_MODULES = ['app', 'list', 'lock', 'ui', 'view', 'window'] as const;

function asset(body: string, type: string): Asset {
  const buf = Buffer.from(body, 'utf8');
  return { body: buf, type, etag: `"${createHash('sha256').update(buf).digest('base64url').slice(0, 22)}"` };
}

/** moduleSource reads a page module: the compiled one when present, else the TypeScript stripped of its types. */
function moduleSource(name: string): string {
  const compiled = new URL(`./page/${name}.js`, import.meta.url);
  if (existsSync(compiled)) return readFileSync(compiled, 'utf8');
  const source = readFileSync(new URL(`./page/${name}.ts`, import.meta.url), 'utf8');
  return stripTypeScriptTypes(source, { mode: 'strip' });
}

/**
 * loadAssets returns the files by URL path: `/` (the page), `/assets/app.css`, the icon, and each module as
 * `/assets/NAME.js` and `/assets/NAME.ts`.
 */
export function loadAssets(): ReadonlyMap<string, Asset> {
  const files = new Map<string, Asset>([
    ['/', asset(INDEX_HTML, 'text/html; charset=utf-8')],
    ['/assets/app.css', asset(STYLE_CSS, 'text/css; charset=utf-8')],
    ['/assets/icon.svg', asset(ICON_SVG, 'image/svg+xml')],
  ]);
  // Browsers ask for /favicon.ico whatever the page says; the same icon answers there.
  files.set('/favicon.ico', files.get('/assets/icon.svg') ?? asset(ICON_SVG, 'image/svg+xml'));
  for (const name of PAGE_MODULES) {
    const js = asset(moduleSource(name), 'text/javascript; charset=utf-8');
    files.set(`/assets/${name}.js`, js);
    files.set(`/assets/${name}.ts`, js);
  }
  return files;
}
