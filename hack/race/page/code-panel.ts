/**
 * The side panel: the same lock in TypeScript, Go, Python and Java, as WAI-ARIA tabs (arrow keys,
 * Home and End move between them; one tab stop), the choice remembered in localStorage, and a
 * copy button. When the clipboard is refused (an insecure context, a denied permission) the code
 * is selected instead and the page says to press Ctrl+C.
 */
import type { Control, Nav, PageDoc, Selection, Store } from './dom.ts';
import { LANGUAGES, SNIPPETS, STORAGE_KEY, nextLanguage, parseLanguage, type Language } from './snippets.ts';

declare const document: PageDoc;
declare const localStorage: Store | undefined;
declare const navigator: Nav;
declare const getSelection: () => Selection | null;

function byId(id: string): Control {
  const el = document.getElementById(id);
  if (el === null) throw new Error(`the page has no #${id}`);
  return el;
}

function remembered(): Language {
  try {
    return parseLanguage(localStorage?.getItem(STORAGE_KEY));
  } catch {
    return 'ts'; // storage disabled: the default, every time
  }
}

function remember(l: Language): void {
  try {
    localStorage?.setItem(STORAGE_KEY, l);
  } catch {
    /* storage disabled or full: the choice lasts until the page is left */
  }
}

/** startCodePanel builds the tabs and shows the remembered language. */
export function startCodePanel(): void {
  const list = byId('langs');
  const panel = byId('code-panel');
  const code = byId('code');
  const note = byId('code-note');
  const copied = byId('copied');
  const tabs = new Map<Language, Control>();
  let current: Language = remembered();

  const show = (l: Language, focus: boolean): void => {
    current = l;
    for (const [lang, tab] of tabs) {
      const on = lang === l;
      tab.setAttribute('aria-selected', String(on));
      tab.tabIndex = on ? 0 : -1;
    }
    const s = SNIPPETS[l];
    code.textContent = s.code;
    code.setAttribute('data-language', l);
    note.textContent = s.note;
    panel.setAttribute('aria-labelledby', `tab-${l}`);
    copied.textContent = '';
    if (focus) tabs.get(l)?.focus();
  };

  for (const l of LANGUAGES) {
    const tab = document.createElement('button');
    tab.setAttribute('type', 'button');
    tab.setAttribute('role', 'tab');
    tab.setAttribute('id', `tab-${l}`);
    tab.setAttribute('aria-controls', 'code-panel');
    tab.setAttribute('data-language', l);
    tab.textContent = SNIPPETS[l].label;
    tab.addEventListener('click', () => {
      show(l, false);
      remember(l);
    });
    tab.addEventListener('keydown', (e) => {
      const next = nextLanguage(current, e.key);
      if (next === undefined) return;
      e.preventDefault();
      show(next, true);
      remember(next);
    });
    tabs.set(l, tab);
    list.append(tab);
  }
  show(current, false);

  byId('copy').addEventListener('click', () => {
    const text = SNIPPETS[current].code;
    const label = SNIPPETS[current].label;
    const fallback = (): void => {
      getSelection()?.selectAllChildren(code);
      copied.textContent = 'Selected: press Ctrl+C (⌘C) to copy.';
    };
    if (navigator.clipboard === undefined) {
      fallback();
      return;
    }
    navigator.clipboard.writeText(text).then(() => {
      copied.textContent = `Copied the ${label} code.`;
    }, fallback);
  });
}
