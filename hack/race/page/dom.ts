/**
 * The browser APIs the race page uses, as types: the dashboard's (src/dashboard/page/dom.ts:
 * the project type-checks without the DOM library, on purpose) plus what an interactive page
 * needs — buttons and inputs, keys, SVG, fetch, localStorage and the clipboard. Erased at run time.
 */
import type { El, Ev, MessageEv, SourceConstructor, TextNode } from '../../../src/dashboard/page/dom.ts';

export type { MessageEv, SourceConstructor, TextNode };

/** KeyEv is a keydown event. */
export interface KeyEv extends Ev {
  readonly key: string;
}

/** Control is an element the page reads or changes: buttons, inputs, the code block. */
export interface Control extends El {
  disabled: boolean;
  checked: boolean;
  tabIndex: number;
  readonly clientWidth: number;
  focus(): void;
  getAttribute(name: string): string | null;
  removeAttribute(name: string): void;
  addEventListener(type: string, listener: (event: KeyEv) => void): void;
}

/** SvgEl is an SVG element (built with createElementNS). */
export interface SvgEl {
  setAttribute(name: string, value: string): void;
  append(...nodes: (SvgEl | string)[]): void;
  replaceChildren(...nodes: SvgEl[]): void;
}

/** PageDoc is `document`. */
export interface PageDoc {
  getElementById(id: string): Control | null;
  createElement(tag: string): Control;
  createElementNS(ns: string, tag: string): SvgEl;
  createTextNode(data: string): TextNode;
}

/** Store is `localStorage` (it throws when storage is disabled: callers catch). */
export interface Store {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

/** Nav is `navigator`: the clipboard exists in secure contexts, loopback included. */
export interface Nav {
  readonly clipboard?: { writeText(text: string): Promise<void> };
}

/** Selection is `getSelection()`'s result, for selecting the code when copying is refused. */
export interface Selection {
  selectAllChildren(node: Control): void;
}

/** Response is the part of a fetch response the page reads. */
export interface Response {
  readonly ok: boolean;
  readonly status: number;
  json(): Promise<unknown>;
}

/** Fetch is `fetch` with the options the page passes. */
export type Fetch = (
  url: string,
  init: { readonly method: string; readonly headers: Readonly<Record<string, string>>; readonly body: string },
) => Promise<Response>;
