/**
 * The README and CONTRIBUTING.md as a reader follows them: the two set-up commands are named as
 * they run, every in-page link lands on a heading and every relative link on a file, the
 * Kubernetes versions agree with the chart and the test control plane, and every flag of the
 * controller, the dashboard, the agent and exec is documented where the README sends the reader.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { load } from 'js-yaml';
import { KUBE_VERSION } from '../../support/testbed/assets.ts';

const root = resolve(import.meta.dirname, '../../..');
const read = (path: string): string => readFileSync(resolve(root, path), 'utf8');
const README = read('README.md');

/** slug: GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Markdown outside fenced code blocks: links inside code are examples, not links. */
const prose = (md: string): string => md.replace(/^```[\s\S]*?^```/gm, '');

/** flagsOf lists the `--flag` words a usage text's option lines start with. */
function flagsOf(source: string, constant: string): string[] {
  const start = source.indexOf(`${constant} = \``);
  expect(start, constant).toBeGreaterThanOrEqual(0);
  const text = source.slice(start, source.indexOf('`;', start));
  return [...text.matchAll(/^ {2,}(--[a-z][a-z-]*)/gm)].map((m) => m[1] ?? '');
}

describe.each(['README.md', 'CONTRIBUTING.md'])('%s', (file) => {
  const md = read(file);
  const anchors = new Set([...md.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1] ?? '')));

  it('links only to headings that exist on the page', () => {
    const links = [...prose(md).matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1] ?? '');
    expect(links.length).toBeGreaterThan(0);
    expect(links.filter((a) => !anchors.has(a))).toEqual([]);
  });

  it('links only to files of the repository that exist', () => {
    const targets = [...prose(md).matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)]
      .map((m) => m[1] ?? '')
      .filter((t) => !/^[a-z]+:/.test(t));
    expect(targets.length).toBeGreaterThan(0);
    expect(targets.filter((t) => !existsSync(resolve(root, dirname(file), t)))).toEqual([]);
  });
});

describe('README.md', () => {
  it('names the two set-up commands as they run: the demo and the tests', () => {
    expect(README).toMatch(/^hack\/npm run demo {3}# /m);
    expect(README).toMatch(/^hack\/npm test {7}# /m);
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    expect(Object.keys(scripts)).toEqual(expect.arrayContaining(['demo', 'test']));
  });

  it('starts with the user: contents, install, first lock, exec, guards, dashboards, comparison, FAQ, uninstall', () => {
    const h2 = [...README.matchAll(/^## (.+)$/gm)].map((m) => m[1] ?? '');
    expect(h2.slice(0, 10)).toEqual([
      'Contents',
      'Install on a cluster',
      'Your first lock in one minute',
      'Jobs and cron fleets: `fencepost exec`',
      'Guards: make the resource refuse a stale holder',
      'Dashboards and metrics',
      'How it compares',
      'FAQ',
      'Uninstall',
      'Try it from a checkout: the demo and the tests',
    ]);
  });

  it("states the chart's kubeVersion and the one tested Kubernetes version, and no other minimum", () => {
    const chart = load(read('charts/fencepost/Chart.yaml')) as { kubeVersion: string };
    const minor = /^>=1\.(\d+)\.0-0$/.exec(chart.kubeVersion)?.[1];
    expect(minor, chart.kubeVersion).toBeDefined();
    expect(README).toContain(`Kubernetes **1.${minor ?? ''} or later** (the chart's \`kubeVersion: "${chart.kubeVersion}"\``);
    expect(README).toContain(`Tested\non Kubernetes **${KUBE_VERSION}**`);
    expect(read('hack/testbed/build.sh')).toContain(`KUBE_VERSION=${KUBE_VERSION}`);
    // The tested version satisfies the chart's range.
    expect(Number(KUBE_VERSION.split('.')[1])).toBeGreaterThanOrEqual(Number(minor));
    // No "Kubernetes ≥ 1.NN" elsewhere that would contradict the chart's minimum.
    expect([...README.matchAll(/Kubernetes (?:≥|>=) ?1\.(\d+)/g)].map((m) => m[0])).toEqual([]);
  });

  it('documents every controller and dashboard flag in its tables', () => {
    const flags = [
      ...flagsOf(read('src/config/controller.ts'), 'CONTROLLER_USAGE'),
      ...flagsOf(read('src/config/dashboard.ts'), 'DASHBOARD_USAGE'),
    ];
    expect(flags.length).toBeGreaterThan(15);
    expect(flags.filter((f) => !README.includes(`| \`${f}`))).toEqual([]);
  });

  it('sends the reader to docs/agent.md, which documents every agent and exec flag', () => {
    expect(README).toContain('[docs/agent.md](docs/agent.md)');
    const agentDoc = read('docs/agent.md');
    const flags = [
      ...flagsOf(read('src/config/agent.ts'), 'AGENT_USAGE'),
      ...flagsOf(read('src/cli/exec-usage.ts'), 'EXEC_USAGE'),
    ];
    expect(flags.length).toBeGreaterThan(10);
    expect(flags.filter((f) => !agentDoc.includes(`\`${f}`))).toEqual([]);
  });
});
