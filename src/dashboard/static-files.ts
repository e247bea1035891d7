/**
 * Building blocks for serving a page's static files, shared by the pages that fencepost serves:
 * the dashboard's (assets.ts) and the race page of `npm run demo -- --web` (hack/race/assets.ts).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';

/** Asset is one file the server sends. */
export interface Asset {
  readonly body: Buffer;
  readonly type: string;
  readonly etag: string;
}

/** staticAsset wraps a file's text with its content type and a strong ETag (a digest of the bytes). */
export function staticAsset(body: string, type: string): Asset {
  const buf = Buffer.from(body, 'utf8');
  return { body: buf, type, etag: `"${createHash('sha256').update(buf).digest('base64url').slice(0, 22)}"` };
}

/**
 * browserModule reads a page's ES module given the URL of its `.ts` source: the compiled `.js`
 * beside it when there is one (a build), else the TypeScript with its types stripped by Node's
 * own `stripTypeScriptTypes` (a checkout). Type-only imports vanish; relative imports keep their
 * `.ts` spelling, so the server must answer to that name too.
 */
export function browserModule(source: URL): string {
  const compiled = new URL(source.href.replace(/\.ts$/, '.js'));
  if (compiled.href !== source.href && existsSync(compiled)) return readFileSync(compiled, 'utf8');
  return stripTypeScriptTypes(readFileSync(source, 'utf8'), { mode: 'strip' });
}

/** JS_TYPE is the content type of a module. */
export const JS_TYPE = 'text/javascript; charset=utf-8';
