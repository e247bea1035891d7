/**
 * Citations of the project's own tracker in the code's prose — the rule "comments say why in
 * words" made checkable, proven by test/unit/lint/citations.test.ts and runnable on its own
 * (`node hack/lint/citations.ts` prints every hit as file:line).
 *
 * A reader of the code has neither the issue tracker nor the review notes nor the fault plan's row
 * numbers at hand, and those numbers say nothing about what can go wrong. So a comment, a test
 * name or any other string in the tracked sources may not cite an issue, a finding or an item by
 * number, nor a row of the fault plan by its label (a capital T and one or two digits). The safety
 * properties S1–S6 stay allowed: docs/safety.md defines them, next to the code that checks them.
 * Another project's tracker, named with its repository (`owner/repo#123`), is a reference a reader
 * can follow and does not match.
 *
 * TypeScript is read with the compiler's own parser, so only comments and string or template text
 * count: a constant named like a label (a test's start time, a capital T and a zero) is code, not a
 * citation. Other files (YAML, Go, Python, Java, Lua, shell, Markdown, chart templates) are read
 * line by line. Left out: JSON (recorded results and fixtures), Go checksums, changelogs, and this
 * rule's own test, whose fixtures are citations on purpose.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';

/** ROOTS: the tracked folders whose files are checked. docs/ may narrate history and is not. */
export const ROOTS = ['src', 'test', 'hack', 'clients', 'bench', 'charts', 'examples'] as const;

/** CITATION: an issue, finding or item by number, or a fault-plan label. */
const CITATION = /\b(?:[Ii]ssues? ?#?\d+|[Ff]indings? #?\d+|[Ii]tems? #?\d+|T\d{1,2})\b/;

/** SKIPPED: files whose text is data or history, not prose about the code. */
const SKIPPED: readonly RegExp[] = [
  /\.json$/,
  /(^|\/)go\.sum$/,
  /(^|\/)CHANGELOG[^/]*$/i,
  /(^|\/)results\//,
  /^test\/unit\/lint\/citations\.test\.ts$/,
];

/** TYPESCRIPT: files parsed as TypeScript (comments and string text only). */
const TYPESCRIPT = /\.(?:[cm]?ts|tsx|[cm]?js)$/;

/** Citation is one hit: where, and the text of its line. */
export interface Citation {
  /** file: the path relative to the repository root, with forward slashes. */
  readonly file: string;
  /** line: 1-based. */
  readonly line: number;
  /** text: the whole line, trimmed. */
  readonly text: string;
}

/** isChecked tells whether the file at `path` (relative to the repository) is checked at all. */
export function isChecked(path: string): boolean {
  return !SKIPPED.some((re) => re.test(path));
}

/** proseRanges returns the [start, end) offsets of every comment and string or template text of a TypeScript source. */
function proseRanges(path: string, text: string): [number, number][] {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const ranges = new Map<number, number>();
  const comments = (pos: number): void => {
    for (const r of ts.getLeadingCommentRanges(text, pos) ?? []) ranges.set(r.pos, r.end);
    for (const r of ts.getTrailingCommentRanges(text, pos) ?? []) ranges.set(r.pos, r.end);
  };
  const visit = (node: ts.Node): void => {
    comments(node.pos);
    comments(node.end);
    if (
      ts.isStringLiteral(node) ||
      ts.isNoSubstitutionTemplateLiteral(node) ||
      ts.isTemplateHead(node) ||
      ts.isTemplateMiddle(node) ||
      ts.isTemplateTail(node) ||
      ts.isJsxText(node)
    ) {
      ranges.set(node.getStart(sf), node.end);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  comments(sf.endOfFileToken.pos);
  return [...ranges.entries()];
}

/** lineOf returns the 1-based line of `offset` in `text`. */
function lineOf(text: string, offset: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i >= 0 && i < offset; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

/** citationsIn returns the hits in one file's text; `path` decides how it is read (TypeScript or lines). */
export function citationsIn(path: string, text: string): Citation[] {
  if (!CITATION.test(text)) return []; // most files: no parse needed
  const lines = text.split('\n');
  const at = (line: number): Citation => ({ file: path, line, text: (lines[line - 1] ?? '').trim() });
  if (!TYPESCRIPT.test(path)) {
    return lines.flatMap((l, i) => (CITATION.test(l) ? [at(i + 1)] : []));
  }
  const found = new Set<number>();
  const global = new RegExp(CITATION.source, 'g');
  for (const [start, end] of proseRanges(path, text)) {
    for (const m of text.slice(start, end).matchAll(global)) found.add(lineOf(text, start + m.index));
  }
  return [...found].sort((a, b) => a - b).map(at);
}

/** trackedFiles lists the files git tracks under ROOTS, relative to `root`. */
export function trackedFiles(root: string): string[] {
  const out = execFileSync('git', ['ls-files', '-z', '--', ...ROOTS], { cwd: root, encoding: 'utf8' });
  return out.split('\0').filter((p) => p !== '');
}

/** findCitations checks every tracked file under ROOTS of the repository at `root`. */
export function findCitations(root: string): Citation[] {
  return trackedFiles(root)
    .filter(isChecked)
    .flatMap((path) => {
      const text = readFileSync(join(root, path), 'utf8');
      return text.includes('\0') ? [] : citationsIn(path, text); // a binary file has no prose
    });
}

if (import.meta.main) {
  const hits = findCitations(resolve(import.meta.dirname, '../..'));
  for (const h of hits) process.stdout.write(`${h.file}:${h.line}: ${h.text}\n`);
  process.stdout.write(`${hits.length} citation(s)\n`);
  process.exitCode = hits.length === 0 ? 0 : 1;
}
