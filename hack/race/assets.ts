/**
 * The race page's files, read once at start: the HTML, the stylesheet, the icon (the dashboard's,
 * taken from its assets) and the page's ES modules, served from their TypeScript with the types
 * stripped (src/dashboard/static-files.ts). Every module answers to `/assets/NAME.js` (the
 * page's script tag) and `/assets/NAME.ts` (how the stripped modules import each other).
 */
import { loadAssets } from '../../src/dashboard/assets.ts';
import { JS_TYPE, browserModule, staticAsset, type Asset } from '../../src/dashboard/static-files.ts';
import { RACE_HTML } from './page/index-html.ts';
import { RACE_CSS } from './page/style-css.ts';

/** PAGE_MODULES: the modules the page loads at run time (dom.ts and events.ts are types only). */
const PAGE_MODULES = ['app', 'code-panel', 'lanes', 'model', 'snippets'] as const;

/** raceAssets returns the files by URL path. */
export function raceAssets(): ReadonlyMap<string, Asset> {
  const files = new Map<string, Asset>([
    ['/', staticAsset(RACE_HTML, 'text/html; charset=utf-8')],
    ['/assets/race.css', staticAsset(RACE_CSS, 'text/css; charset=utf-8')],
  ]);
  const icon = loadAssets().get('/assets/icon.svg');
  if (icon !== undefined) {
    files.set('/assets/icon.svg', icon);
    files.set('/favicon.ico', icon);
  }
  for (const name of PAGE_MODULES) {
    const js = staticAsset(browserModule(new URL(`./page/${name}.ts`, import.meta.url)), JS_TYPE);
    files.set(`/assets/${name}.js`, js);
    files.set(`/assets/${name}.ts`, js);
  }
  return files;
}
