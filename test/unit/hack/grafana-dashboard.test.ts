import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../../..');

interface Panel {
  readonly id: number;
  readonly type: string;
  readonly title: string;
  readonly gridPos: { readonly h: number; readonly w: number; readonly x: number; readonly y: number };
  readonly datasource?: { readonly uid: string };
  readonly targets?: readonly { readonly refId: string; readonly expr: string }[];
}
interface Dashboard {
  readonly uid: string;
  readonly title: string;
  readonly schemaVersion: number;
  readonly templating: { readonly list: readonly { readonly name: string }[] };
  readonly panels: readonly Panel[];
}

const dashboard = JSON.parse(
  readFileSync(join(ROOT, 'charts/fencepost/dashboards/fencepost.json'), 'utf8'),
) as Dashboard;

/** exported is every metric name src/ registers (the controller's and the agent's). */
function exported(): Set<string> {
  const names = new Set<string>();
  for (const e of readdirSync(join(ROOT, 'src'), { withFileTypes: true, recursive: true })) {
    if (!e.isFile() || !e.name.endsWith('.ts')) continue;
    const text = readFileSync(join(e.parentPath, e.name), 'utf8');
    for (const m of text.matchAll(
      /'((?:fencepost|controller_runtime|workqueue|leader_election|rest_client)_[a-z_]+)'/g,
    ))
      names.add(m[1] ?? '');
  }
  return names;
}

describe('the Grafana dashboard (charts/fencepost/dashboards/fencepost.json)', () => {
  const graphs = dashboard.panels.filter((p) => p.type !== 'row');

  it('is a dashboard Grafana imports: uid, title, schemaVersion, a data source variable every panel uses', () => {
    expect(dashboard.uid).toBe('fencepost');
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    expect(dashboard.templating.list.map((v) => v.name)).toEqual(['datasource', 'namespace']);
    expect(new Set(dashboard.panels.map((p) => p.id)).size).toBe(dashboard.panels.length);
    for (const p of graphs) {
      expect(p.datasource?.uid, p.title).toBe('${datasource}');
      expect(p.targets?.length ?? 0, p.title).toBeGreaterThan(0);
      expect(new Set(p.targets?.map((t) => t.refId)).size, p.title).toBe(p.targets?.length);
    }
  });

  it('lays panels out on the 24-column grid without overlaps', () => {
    const cells = new Set<string>();
    for (const p of dashboard.panels) {
      const { h, w, x, y } = p.gridPos;
      expect(x + w, p.title).toBeLessThanOrEqual(24);
      for (let r = y; r < y + h; r++)
        for (let c = x; c < x + w; c++) {
          expect(cells.has(`${r},${c}`), `${p.title} overlaps at ${r},${c}`).toBe(false);
          cells.add(`${r},${c}`);
        }
    }
  });

  it('queries only metrics the controller and the agent export, with balanced brackets', () => {
    const names = exported();
    expect(names.has('fencepost_locks')).toBe(true);
    const used = new Set<string>();
    for (const p of graphs)
      for (const t of p.targets ?? []) {
        for (const [open, close] of [
          ['(', ')'],
          ['{', '}'],
          ['[', ']'],
        ] as const)
          expect(t.expr.split(open).length, `${p.title}: ${t.expr}`).toBe(t.expr.split(close).length);
        for (const m of t.expr.matchAll(
          /\b((?:fencepost|controller_runtime|workqueue|leader_election|rest_client)_[a-z_]+)/g,
        ))
          used.add((m[1] ?? '').replace(/_(bucket|sum|count)$/, ''));
      }
    expect([...used].filter((n) => !names.has(n))).toEqual([]);
    // The panels cover the metrics docs/operations.md tells operators to graph.
    for (const n of [
      'fencepost_locks',
      'fencepost_grants_total',
      'fencepost_handoff_duration_seconds',
      'fencepost_agent_lock_held',
    ])
      expect(used.has(n), n).toBe(true);
  });
});
