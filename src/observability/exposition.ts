/**
 * A small Prometheus registry for the agent: counters and gauges with labels, the process_* and
 * nodejs_* families every Node exporter exports (the names prom-client's collectDefaultMetrics
 * uses), and the text exposition format 0.0.4. prom-client costs the agent about 11 MiB of RSS
 * (with @opentelemetry/api, 83 of the 118 package files it loaded); the controller keeps it
 * (metrics.ts).
 *
 * Caveats: no histograms or summaries (the agent has none); `nodejs_eventloop_lag_seconds` is
 * measured at scrape time (a setImmediate's delay), as prom-client measures it; the per-GC and
 * heap-space families of prom-client are not exported.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** LabelValues are a series' label values by label name. */
export type LabelValues = Readonly<Record<string, string>>;

/** Family is one metric family and its series. */
interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge';
  readonly labelNames: readonly string[];
  readonly values: Map<string, { labels: LabelValues; value: number }>;
}

/** MetricOptions name a family. */
export interface MetricOptions {
  readonly name: string;
  readonly help: string;
  readonly labelNames?: readonly string[];
}

/** TextRegistry holds metric families and renders them (module comment). */
export class TextRegistry {
  /** contentType is the exposition format's media type. */
  readonly contentType = 'text/plain; version=0.0.4; charset=utf-8';
  readonly #families: Family[] = [];
  readonly #collectors: (() => Promise<void> | void)[] = [];

  /** counter registers a counter; inc adds `by` (default 1) to the series of `labels`. */
  counter(o: MetricOptions): { inc(labels?: LabelValues, by?: number): void } {
    const f = this.#family(o, 'counter');
    return {
      inc: (labels = {}, by = 1) => {
        const key = seriesKey(f, labels);
        const s = f.values.get(key);
        if (s !== undefined) s.value += by;
        else f.values.set(key, { labels, value: by });
      },
    };
  }

  /** gauge registers a gauge; set replaces the value of the series of `labels`. */
  gauge(o: MetricOptions): { set(labels: LabelValues, value: number): void } {
    const f = this.#family(o, 'gauge');
    return {
      set: (labels, value) => {
        f.values.set(seriesKey(f, labels), { labels, value });
      },
    };
  }

  /** collect registers a function run before every scrape (to set gauges from the process). */
  collect(fn: () => Promise<void> | void): void {
    this.#collectors.push(fn);
  }

  /** metrics renders every family in the text format, after running the collectors. */
  async metrics(): Promise<string> {
    for (const c of this.#collectors) await c();
    const out: string[] = [];
    for (const f of this.#families) {
      out.push(`# HELP ${f.name} ${f.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${f.name} ${f.type}`);
      for (const { labels, value } of f.values.values())
        out.push(`${f.name}${formatLabels(labels)} ${formatValue(value)}`);
    }
    return `${out.join('\n')}\n`;
  }

  #family(o: MetricOptions, type: Family['type']): Family {
    if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(o.name)) throw new Error(`invalid metric name ${JSON.stringify(o.name)}`);
    if (this.#families.some((f) => f.name === o.name)) throw new Error(`metric ${o.name} is already registered`);
    const f: Family = { name: o.name, help: o.help, type, labelNames: o.labelNames ?? [], values: new Map() };
    this.#families.push(f);
    return f;
  }
}

function seriesKey(f: Family, labels: LabelValues): string {
  for (const k of Object.keys(labels))
    if (!f.labelNames.includes(k)) throw new Error(`metric ${f.name} has no label ${JSON.stringify(k)}`);
  return f.labelNames.map((n) => labels[n] ?? '').join('\u0000');
}

function formatLabels(labels: LabelValues): string {
  const parts = Object.entries(labels).map(
    ([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')}"`,
  );
  return parts.length > 0 ? `{${parts.join(',')}}` : '';
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

/**
 * processMetrics registers the process_* and nodejs_* families (prom-client's names and units),
 * read at every scrape.
 */
export function processMetrics(reg: TextRegistry): void {
  const g = (name: string, help: string) => reg.gauge({ name, help });
  const c = (name: string, help: string): { set(v: number): void } => {
    // A counter whose value is read from the process, not incremented: rendered as a counter.
    const family = reg.counter({ name, help });
    let last = 0;
    return {
      set(v: number) {
        family.inc({}, v - last);
        last = v;
      },
    };
  };
  const cpuUser = c('process_cpu_user_seconds_total', 'Total user CPU time spent in seconds.');
  const cpuSystem = c('process_cpu_system_seconds_total', 'Total system CPU time spent in seconds.');
  const cpu = c('process_cpu_seconds_total', 'Total user and system CPU time spent in seconds.');
  const start = g('process_start_time_seconds', 'Start time of the process since unix epoch in seconds.');
  const rss = g('process_resident_memory_bytes', 'Resident memory size in bytes.');
  const vsz = g('process_virtual_memory_bytes', 'Virtual memory size in bytes.');
  const heap = g('process_heap_bytes', 'Process heap size in bytes.');
  const fds = g('process_open_fds', 'Number of open file descriptors.');
  const lag = g('nodejs_eventloop_lag_seconds', 'Lag of event loop in seconds.');
  const heapTotal = g('nodejs_heap_size_total_bytes', 'Process heap size from Node.js in bytes.');
  const heapUsed = g('nodejs_heap_size_used_bytes', 'Process heap size used from Node.js in bytes.');
  const external = g('nodejs_external_memory_bytes', 'Node.js external memory size in bytes.');
  const version = reg.gauge({
    name: 'nodejs_version_info',
    help: 'Node.js version info.',
    labelNames: ['version', 'major', 'minor', 'patch'],
  });
  const [major = '', minor = '', patch = ''] = process.versions.node.split('.');
  version.set({ version: process.version, major, minor, patch }, 1);
  start.set({}, Math.round(Date.now() / 1000 - process.uptime()));
  reg.collect(async () => {
    const u = process.cpuUsage();
    cpuUser.set(u.user / 1e6);
    cpuSystem.set(u.system / 1e6);
    cpu.set((u.user + u.system) / 1e6);
    const m = process.memoryUsage();
    heapTotal.set({}, m.heapTotal);
    heapUsed.set({}, m.heapUsed);
    external.set({}, m.external);
    const status = procStatus();
    rss.set({}, status.VmRSS ?? m.rss);
    if (status.VmSize !== undefined) vsz.set({}, status.VmSize);
    if (status.VmData !== undefined) heap.set({}, status.VmData);
    try {
      fds.set({}, readdirSync('/proc/self/fd').length - 1);
    } catch {
      /* not Linux */
    }
    const t0 = performance.now();
    await new Promise<void>((resolve) => setImmediate(resolve));
    lag.set({}, (performance.now() - t0) / 1000);
  });
}

/** procStatus reads /proc/self/status's Vm* lines in bytes (empty off Linux). */
function procStatus(): Partial<Record<'VmRSS' | 'VmSize' | 'VmData', number>> {
  try {
    const out: Partial<Record<'VmRSS' | 'VmSize' | 'VmData', number>> = {};
    for (const m of readFileSync('/proc/self/status', 'utf8').matchAll(/^(VmRSS|VmSize|VmData):\s+(\d+) kB$/gm))
      out[m[1] as 'VmRSS' | 'VmSize' | 'VmData'] = Number(m[2]) * 1024;
    return out;
  } catch {
    return {};
  }
}
