/**
 * The few browser APIs the page uses, as types. The project type-checks for Node (no DOM library
 * in tsconfig.json), and adding the DOM library to the whole program would let Node code use
 * `window` or `document` unnoticed; so the page declares what it needs here, as module-scoped
 * types that erase to nothing. Only what page/app.ts calls is declared.
 */

/** El is the part of an HTMLElement the page uses (inputs and selects included: `value`). */
export interface El {
  textContent: string | null;
  hidden: boolean;
  className: string;
  value: string;
  setAttribute(name: string, value: string): void;
  append(...nodes: (El | string)[]): void;
  replaceChildren(...nodes: (El | TextNode | string)[]): void;
  insertBefore(node: El, before: El): void;
  remove(): void;
  addEventListener(type: string, listener: (event: Ev) => void): void;
  getBoundingClientRect(): Rect;
  /** style: written through the CSSOM, which the CSP's `style-src 'self'` allows (a `style` attribute it would not). */
  readonly style: { height: string };
}

/** Rect is a box in viewport pixels. */
export interface Rect {
  readonly top: number;
  readonly bottom: number;
  readonly height: number;
}

/** Win is `window`: the viewport's height, its scroll and resize events, and animation frames. */
export interface Win {
  readonly innerHeight: number;
  addEventListener(type: string, listener: () => void, options?: { readonly passive?: boolean }): void;
  requestAnimationFrame(callback: () => void): number;
}

/** TextNode is a Text node: its `data` is rewritten in place. */
export interface TextNode {
  data: string;
}

/** Ev is an event: `preventDefault` for the filter form. */
export interface Ev {
  preventDefault(): void;
}

/** Doc is `document`. */
export interface Doc {
  title: string;
  getElementById(id: string): El | null;
  createElement(tag: string): El;
  createTextNode(data: string): TextNode;
}

/** MessageEv is an EventSource message. */
export interface MessageEv {
  readonly data: string;
}

/** Source is an EventSource: reconnects by itself after an error (the server then sends a new snapshot). */
export interface Source {
  addEventListener(type: string, listener: (event: MessageEv) => void): void;
  close(): void;
}

/** SourceConstructor is the EventSource class. */
export type SourceConstructor = new (url: string) => Source;

/** Loc is `location`. */
export interface Loc {
  readonly search: string;
}

/** Hist is `history`. */
export interface Hist {
  replaceState(data: null, unused: string, url: string): void;
}
