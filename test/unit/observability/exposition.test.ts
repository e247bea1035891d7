import { describe, expect, it } from 'vitest';
import { TextRegistry, processMetrics } from '../../../src/observability/exposition.ts';

describe('TextRegistry (the agent metrics, without prom-client)', () => {
  it('renders counters and gauges with labels in the text format 0.0.4, escaping label values', async () => {
    const reg = new TextRegistry();
    const c = reg.counter({ name: 'requests_total', help: 'Requests.', labelNames: ['code', 'host'] });
    const g = reg.gauge({ name: 'held', help: 'Held.\nSecond line', labelNames: ['lock'] });
    c.inc({ code: '200', host: 'h:1' });
    c.inc({ code: '200', host: 'h:1' }, 2);
    c.inc({ code: '<error>', host: 'h:1' });
    g.set({ lock: 'a"b\\c' }, 1);
    g.set({ lock: 'a"b\\c' }, 0);
    expect(reg.contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(await reg.metrics()).toBe(
      [
        '# HELP requests_total Requests.',
        '# TYPE requests_total counter',
        'requests_total{code="200",host="h:1"} 3',
        'requests_total{code="<error>",host="h:1"} 1',
        '# HELP held Held.\\nSecond line',
        '# TYPE held gauge',
        'held{lock="a\\"b\\\\c"} 0',
        '',
      ].join('\n'),
    );
  });

  it('refuses a label it was not given and a second family of the same name', () => {
    const reg = new TextRegistry();
    const c = reg.counter({ name: 'x_total', help: 'x', labelNames: ['a'] });
    expect(() => c.inc({ b: '1' })).toThrow('metric x_total has no label "b"');
    expect(() => reg.gauge({ name: 'x_total', help: 'x' })).toThrow('metric x_total is already registered');
    expect(() => reg.gauge({ name: 'bad-name', help: 'x' })).toThrow('invalid metric name "bad-name"');
  });

  it("exports prom-client's process_* and nodejs_* families, read at every scrape", async () => {
    const reg = new TextRegistry();
    processMetrics(reg);
    const text = await reg.metrics();
    for (const [name, type] of [
      ['process_cpu_user_seconds_total', 'counter'],
      ['process_cpu_system_seconds_total', 'counter'],
      ['process_cpu_seconds_total', 'counter'],
      ['process_start_time_seconds', 'gauge'],
      ['process_resident_memory_bytes', 'gauge'],
      ['process_open_fds', 'gauge'],
      ['nodejs_eventloop_lag_seconds', 'gauge'],
      ['nodejs_heap_size_used_bytes', 'gauge'],
      ['nodejs_heap_size_total_bytes', 'gauge'],
      ['nodejs_version_info', 'gauge'],
    ])
      expect(text).toMatch(new RegExp(`^# TYPE ${name} ${type}\\n${name}(\\{[^}]*\\})? [0-9.e+-]+$`, 'm'));
    const rss = Number(/^process_resident_memory_bytes (\d+)$/m.exec(text)?.[1]);
    expect(rss).toBeGreaterThan(10 * 1024 * 1024);
    const cpu = (t: string): number => Number(/^process_cpu_seconds_total (\S+)$/m.exec(t)?.[1]);
    const before = cpu(text);
    const until = performance.now() + 30;
    while (performance.now() < until); // burn a little CPU
    expect(cpu(await reg.metrics())).toBeGreaterThan(before);
  });
});
