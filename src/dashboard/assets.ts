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

/** Asset is one file the server sends. */
export interface Asset {
  readonly body: Buffer;
  readonly type: string;
  readonly etag: string;
}

/** PAGE_MODULES: the page's modules loaded at run time (dom.ts and the wire types are imported as types only). */
const PAGE_MODULES = ['app', 'view'] as const;

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
 * loadAssets returns the files by URL path: `/` (the page), `/assets/app.css`, and each module as
 * `/assets/NAME.js` and `/assets/NAME.ts`.
 */
export function loadAssets(): ReadonlyMap<string, Asset> {
  const files = new Map<string, Asset>([
    ['/', asset(INDEX_HTML, 'text/html; charset=utf-8')],
    ['/assets/app.css', asset(STYLE_CSS, 'text/css; charset=utf-8')],
  ]);
  for (const name of PAGE_MODULES) {
    const js = asset(moduleSource(name), 'text/javascript; charset=utf-8');
    files.set(`/assets/${name}.js`, js);
    files.set(`/assets/${name}.ts`, js);
  }
  return files;
}
