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
import { INDEX_HTML } from './page/index-html.ts';
import { STYLE_CSS } from './page/style-css.ts';
import { JS_TYPE, browserModule, staticAsset, type Asset } from './static-files.ts';

/** ICON_SVG: the page's icon, a padlock (a file, so that img-src 'self' covers it). */
const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect x="2" y="7" width="12" height="8" rx="1" fill="#0a6b2e"/><path d="M5 7V5a3 3 0 0 1 6 0v2" fill="none" stroke="#0a6b2e" stroke-width="2"/></svg>';

/** PAGE_MODULES: the page's modules loaded at run time (dom.ts and the wire types are imported as types only). */
const PAGE_MODULES = ['app', 'list', 'lock', 'ui', 'view', 'window'] as const;

/**
 * loadAssets returns the files by URL path: `/` (the page), `/assets/app.css`, the icon, and each module as
 * `/assets/NAME.js` and `/assets/NAME.ts`.
 */
export function loadAssets(): ReadonlyMap<string, Asset> {
  const files = new Map<string, Asset>([
    ['/', staticAsset(INDEX_HTML, 'text/html; charset=utf-8')],
    ['/assets/app.css', staticAsset(STYLE_CSS, 'text/css; charset=utf-8')],
    ['/assets/icon.svg', staticAsset(ICON_SVG, 'image/svg+xml')],
  ]);
  // Browsers ask for /favicon.ico whatever the page says; the same icon answers there.
  files.set('/favicon.ico', files.get('/assets/icon.svg') ?? staticAsset(ICON_SVG, 'image/svg+xml'));
  for (const name of PAGE_MODULES) {
    const js = staticAsset(browserModule(new URL(`./page/${name}.ts`, import.meta.url)), JS_TYPE);
    files.set(`/assets/${name}.js`, js);
    files.set(`/assets/${name}.ts`, js);
  }
  return files;
}
