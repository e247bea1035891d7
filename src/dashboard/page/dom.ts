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
}

/** TextNode is a Text node: its `data` is rewritten in place. */
export interface TextNode {
  data: string;
}

/** IntersectionEntry: an element came on screen (within the root margin) or left it. */
export interface IntersectionEntry {
  readonly target: El;
  readonly isIntersecting: boolean;
}

/** IntersectionObserverConstructor is the IntersectionObserver class. */
export type IntersectionObserverConstructor = new (
  callback: (entries: readonly IntersectionEntry[]) => void,
  options?: { readonly rootMargin?: string },
) => { observe(el: El): void; unobserve(el: El): void };

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
