// The citation rule (hack/lint/citations.ts): comments, test names and other strings in the tracked
// sources say why in words and cite no issue, finding, item or fault-plan row by number. The
// fixtures below are citations on purpose (this file is the one the rule leaves out); the last test
// runs the rule over the real tree and names every hit as file:line.
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { citationsIn, findCitations, isChecked } from '../../../hack/lint/citations.ts';

const root = resolve(import.meta.dirname, '../../..');

/** lines returns the line numbers of the hits in `text` read as the file `path`. */
const lines = (path: string, text: string): number[] => citationsIn(path, text).map((c) => c.line);

describe('the citation rule in TypeScript: comments and strings only', () => {
  it.each([
    { what: 'an issue in a line comment', code: '// fixed in issue 15\nconst x = 1;', want: [1] },
    { what: 'an issue with a hash, in a block comment', code: '/**\n * see Issue #42\n */\nconst x = 1;', want: [2] },
    { what: 'a finding in a trailing comment', code: 'const x = 1; // finding 2', want: [1] },
    { what: 'an item', code: 'const x = 1;\n/* items 4 and 5 */', want: [2] },
    { what: 'a fault-plan label in a test name', code: "it('steps down (T11)', () => {});", want: [1] },
    { what: 'a label in a template literal', code: 'const s = `row T4 of ${1} plans`;', want: [1] },
    { what: 'a label after an expression of a template', code: 'const s = `${1} and T17`;', want: [1] },
    { what: 'a comment at the end of the file', code: 'const x = 1;\n// issue 3', want: [2] },
    { what: 'one line with two citations, once', code: '// issue 1, finding 2', want: [1] },
  ])('reports $what', ({ code, want }) => {
    expect(lines('src/x.ts', code)).toEqual(want);
  });

  it.each([
    { what: 'a constant named like a label', code: "const T0 = new Date('2025-01-01T00:00:00Z');\nconst d = T0;" },
    { what: 'an ISO time in a string', code: "const at = '2026-12-04T06:00:00.123Z';" },
    { what: 'a safety property of docs/safety.md', code: '// S1 and S3 hold over every trial' },
    { what: "another project's issue, named with its repository", code: '// kubernetes-client/javascript#364' },
    { what: 'a word that only starts like one', code: '// the issues of retries; findings below; items in the queue' },
    { what: 'a lowercase token name', code: '// the counter moved to t1+1' },
  ])('does not report $what', ({ code }) => {
    expect(lines('src/x.ts', code)).toEqual([]);
  });
});

describe('the citation rule in other files: every line', () => {
  it.each([
    { path: 'charts/fencepost/templates/x.yaml', text: 'a: 1\n# renew only (FAULTS T16)\n', want: [2] },
    { path: 'clients/go/x.go', text: 'package x\n\n// See issue 20.\n', want: [3] },
    { path: 'clients/python/x.py', text: '"""Finding 9."""\n', want: [1] },
    { path: 'bench/README.md', text: 'since issue 16 the same\n', want: [1] },
  ])('reports a citation in $path', ({ path, text, want }) => {
    expect(lines(path, text)).toEqual(want);
  });
});

describe('what the rule checks at all', () => {
  it.each([
    'bench/results/compare.json',
    'hack/testbed/etcd/go.sum',
    'clients/python/CHANGELOG.md',
    'bench/results/notes.md',
    'test/unit/lint/citations.test.ts',
  ])('leaves out %s (data, history or its own fixtures)', (path) => {
    expect(isChecked(path)).toBe(false);
  });

  it.each(['src/agent/session.ts', 'charts/fencepost/templates/lease-protection-policy.yaml', 'bench/README.md'])(
    'checks %s',
    (path) => {
      expect(isChecked(path)).toBe(true);
    },
  );
});

describe('the tracked sources', () => {
  it('cite no issue, finding, item or fault-plan row by number (src, test, hack, clients, bench, charts, examples)', () => {
    const hits = findCitations(root).map((c) => `${c.file}:${c.line}: ${c.text}`);
    expect(hits).toEqual([]);
  });
});
