/**
 * What both of the page's views share: finding and making elements, the connection indicator,
 * the server's clock offset and the countdowns. Browser only (page/list.ts and page/lock.ts).
 */
import type { Doc, El, TextNode } from './dom.ts';
import { countdownText } from './view.ts';

declare const document: Doc;

/** offsetMs: the server's clock minus this browser's, from the last message. */
let offsetMs = 0;

/** nowMs: the browser's clock corrected to the server's. */
export const nowMs = (): number => Date.now() + offsetMs;

/** heard records the server's `now` from a message, so countdowns follow the server's clock. */
export function heard(serverNow: string): void {
  const t = Date.parse(serverNow);
  if (Number.isFinite(t)) offsetMs = t - Date.now();
}

/** byId finds an element of the page; throws if the HTML lacks it (a bug, not a state). */
export function byId(id: string): El {
  const el = document.getElementById(id);
  if (el === null) throw new Error(`the page has no #${id}`);
  return el;
}

/** h makes an element with attributes and children. */
export function h(tag: string, attrs: Readonly<Record<string, string>> = {}, ...children: (El | string)[]): El {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  el.append(...children);
  return el;
}

/** setText writes text only when it changed: each write invalidates the element's style and layout. */
export function setText(el: El, text: string): void {
  if (el.textContent !== text) el.textContent = text;
}

/** connection shows the stream's state in the header (a polite live region). */
export function connection(text: string, ok: boolean): void {
  const el = byId('conn');
  setText(el, text);
  el.className = ok ? 'conn ok' : 'conn down';
}

/**
 * Countdown is one element showing a countdown: its own text node, rewritten in place (a new
 * `textContent` would make a new node per second per lock, which the renderer's heap collects
 * late: the 1,000-lock benchmark's tab grew by 140 MB a minute that way).
 */
interface Countdown {
  readonly text: TextNode;
  expire: string | undefined;
}

/** countdowns: every countdown in the DOM. The list keeps only its rendered rows' here (a screenful). */
const countdowns = new Map<El, Countdown>();

function draw(c: Countdown): void {
  const text = countdownText(c.expire, nowMs());
  if (c.text.data !== text) c.text.data = text;
}

/** countdown makes `el` count down to `expire` (or updates what it counts to). */
export function countdown(el: El, expire: string | undefined): void {
  let c = countdowns.get(el);
  if (c === undefined) {
    const text = document.createTextNode('');
    el.replaceChildren(text);
    c = { text, expire };
    countdowns.set(el, c);
  }
  c.expire = expire;
  draw(c);
}

/** dropCountdown forgets an element that left the DOM. */
export function dropCountdown(el: El): void {
  countdowns.delete(el);
}

/** dropAllCountdowns forgets every countdown (the lock view redraws all of its own). */
export function dropAllCountdowns(): void {
  countdowns.clear();
}

/** tick redraws every countdown whose text changed; app.ts calls it a few times a second. */
export function tick(): void {
  for (const c of countdowns.values()) draw(c);
}
