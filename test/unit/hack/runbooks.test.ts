import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../../..');
const rule = readFileSync(join(ROOT, 'charts/fencepost/templates/prometheusrule.yaml'), 'utf8');
const alerts = [...rule.matchAll(/- alert: (\w+)/g)].map((m) => m[1] ?? '');

describe('the chart alerts and docs/runbooks', () => {
  it('has alerts to check', () => {
    expect(alerts.length).toBeGreaterThanOrEqual(6);
  });

  it.each(alerts)('%s has a runbook_url to its own page, which exists, is listed, and names the alert', (alert) => {
    const block = rule.slice(rule.indexOf(`- alert: ${alert}`)).split(/\n\s+- alert: /)[0] ?? '';
    expect(block).toContain(`runbook_url: "{{ $v.runbookBaseUrl }}/${alert}.md"`);
    const page = join(ROOT, 'docs/runbooks', `${alert}.md`);
    expect(existsSync(page), page).toBe(true);
    const text = readFileSync(page, 'utf8');
    expect(text.startsWith(`# ${alert}\n`)).toBe(true);
    for (const part of ['**Meaning.**', '**Impact.**', '**Diagnosis.**', '**Mitigation.**'])
      expect(text).toContain(part);
    expect(readFileSync(join(ROOT, 'docs/runbooks/README.md'), 'utf8')).toContain(`(${alert}.md)`);
  });

  it('points runbookBaseUrl at the repository folder by default', () => {
    const values = readFileSync(join(ROOT, 'charts/fencepost/values.yaml'), 'utf8');
    expect(values).toMatch(/runbookBaseUrl: https:\/\/github\.com\/fencepost\/fencepost\/blob\/main\/docs\/runbooks\n/);
  });
});
