/**
 * The layers of src/ and what each may import — the table docs/design.md ("Layers") shows, checked
 * by the ESLint rule `fencepost/layers` (eslint.config.js) and proven by
 * test/unit/lint/layers.test.ts.
 *
 * A module's layer is its first folder under src/ (`(root)` for src/index.ts). It may import its
 * own layer, the layers listed as `imports`, and packages except those in `forbiddenPackages`
 * (`'*'`: no package at all, `node:` built-ins included). Type-only imports count: a dependency
 * is a dependency even when it is erased. Relative specifiers are resolved against the importing
 * file, so the depth of a folder does not matter. A file in a folder that is not in the table is
 * reported, so a new folder gets its row on purpose.
 */
import { dirname, relative, resolve, sep } from 'node:path';
import type { Rule } from 'eslint';

/** Layer describes what one src/ folder may import. */
export interface Layer {
  /** holds: what the folder is for (shown in docs/design.md). */
  readonly holds: string;
  /** imports: the other src/ folders it may import. */
  readonly imports: readonly string[];
  /** forbiddenPackages: packages it must not import; '*' forbids every package. */
  readonly forbiddenPackages?: readonly string[];
}

/** KUBERNETES_CLIENT: the packages that are a Kubernetes client. */
const KUBERNETES_CLIENT = ['@kubernetes/client-node'];

/**
 * SERVICES: the layers everything that talks to the API server stands on (the controller, the
 * agent, the library and the CLI each import all of them, and more).
 */
const SERVICES = ['protocol', 'runtime', 'config', 'api', 'observability', 'lease', 'kube', 'transport'] as const;

/**
 * LAYERS, bottom up. The rules the design asks for: protocol/ and runtime/ import nothing of
 * ours (runtime is generic controller machinery, with no lock knowledge, so not even the
 * protocol); nothing imports cli/; controllers/ and agent/ never import each other; guards/ import
 * no Kubernetes client, and of ours only the protocol; stores/ (Redis, Redlock) import no
 * Kubernetes client either: they are the path that works without a cluster.
 */
export const LAYERS: Readonly<Record<string, Layer>> = {
  protocol: {
    holds:
      'what controller and agent agree on: Lease name, labels, annotation keys, holder identity, term timings, token parsing',
    imports: [],
    forbiddenPackages: ['*'],
  },
  runtime: {
    holds:
      'generic controller machinery: work queue, rate limiters, informers, controller loop, finalizer, leader election, the holder core, errors, clock',
    imports: [],
  },
  config: { holds: 'flag and environment parsing into typed, frozen configs', imports: [] },
  api: {
    holds: 'the DistributedLock API types, schema shapes, conditions, timings after defaults',
    imports: ['protocol'],
  },
  observability: { holds: 'logger, metrics, health and metrics endpoints', imports: ['config'] },
  lease: {
    holds: 'the Lease as a lock record: parse it, build grant/renew/release bodies',
    imports: ['protocol', 'runtime'],
  },
  transport: {
    holds:
      'the one API client of every binary (no @kubernetes/client-node): kubeconfig (every form kubectl loads) and in-cluster settings, kept-alive HTTPS, the typed Lease, pod, Event and custom-object requests, the one informer fed by this client',
    imports: ['runtime'],
    forbiddenPackages: KUBERNETES_CLIENT,
  },
  kube: {
    holds:
      "adapters to the API server over the transport's client: the JSON request port, the pod patcher, the custom-resource writer, request options, events",
    imports: ['protocol', 'runtime', 'observability', 'transport'],
  },
  fencing: { holds: 'token dispensers (Redis counter, Lease high-water mark)', imports: ['protocol', 'api'] },
  stores: {
    holds:
      'lock stores the library holds directly, without Kubernetes: single Redis and Redlock (acquire, watchdog, release, tokens)',
    imports: ['protocol', 'runtime', 'observability', 'fencing'],
    forbiddenPackages: KUBERNETES_CLIENT,
  },
  guards: {
    holds: 'Redis, SQL, HTTP guards that refuse stale tokens; load no Kubernetes client',
    imports: ['protocol'],
    forbiddenPackages: KUBERNETES_CLIENT,
  },
  controllers: {
    holds: 'the DistributedLock controller: observe → decide → act → status',
    imports: [...SERVICES, 'fencing', 'stores'],
  },
  agent: {
    holds: 'the holder side: the lock session, the local HTTP API, state files',
    imports: [...SERVICES, 'stores'],
  },
  client: {
    holds: 'the library: acquire() over the agent session, or over a Redis or Redlock store',
    imports: [...SERVICES, 'agent', 'guards', 'stores'],
  },
  dashboard: {
    holds:
      'the read-only web dashboard: a pure model folding lock, Lease and Event watches, the page, the HTTP/SSE server',
    imports: ['protocol', 'runtime', 'api', 'lease', 'kube'],
  },
  cli: {
    holds: 'the command-line entry points: controller, agent, exec, the kubectl plugin, the dashboard',
    imports: [...SERVICES, 'fencing', 'stores', 'guards', 'controllers', 'agent', 'client', 'dashboard'],
  },
  '(root)': {
    holds: 'the library entry: acquire() and the guards',
    imports: ['protocol', 'api', 'agent', 'client', 'guards', 'stores'],
  },
};

/** layerOf is the layer of an absolute file path under srcDir, or undefined outside src/. */
export function layerOf(srcDir: string, file: string): string | undefined {
  const rel = relative(srcDir, file);
  if (rel === '' || rel.startsWith('..') || resolve(srcDir, rel) !== resolve(file)) return undefined;
  const parts = rel.split(sep);
  return parts.length === 1 ? '(root)' : parts[0];
}

/** packageOf is the package a bare specifier names (`@scope/name` or `name`; `node:` built-ins as `node:`). */
function packageOf(specifier: string): string {
  if (specifier.startsWith('node:')) return 'node:';
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
}

/**
 * layersRule reports an import that its layer's row does not allow. `srcDir` is the absolute path
 * of src/ (eslint.config.js passes the repository's).
 */
export function layersRule(srcDir: string): Rule.RuleModule {
  return {
    meta: {
      type: 'problem',
      docs: { description: 'Enforce the src/ layer table (hack/lint/layers.ts, docs/design.md "Layers")' },
      schema: [],
      messages: {
        layer:
          '{{from}}/ may not import {{to}}/ ({{specifier}}): {{from}}/ may import {{allowed}} (hack/lint/layers.ts).',
        pkg: '{{from}}/ may not import the package {{pkg}} ({{specifier}}) (hack/lint/layers.ts).',
        unknown: 'src/{{from}}/ is not in the layer table: add its row to hack/lint/layers.ts and docs/design.md.',
      },
    },
    create(context) {
      const file = context.filename;
      const from = layerOf(srcDir, file);
      if (from === undefined) return {};
      const row = LAYERS[from];
      if (row === undefined)
        return {
          Program: (node) => {
            context.report({ node, messageId: 'unknown', data: { from } });
          },
        };
      const check = (node: Rule.Node, source: unknown): void => {
        if (typeof source !== 'string') return;
        if (source.startsWith('.')) {
          const to = layerOf(srcDir, resolve(dirname(file), source));
          if (to === undefined || to === from || row.imports.includes(to)) return;
          const allowed =
            row.imports.length > 0 ? row.imports.map((l) => `${l}/`).join(', ') : 'nothing outside itself';
          context.report({ node, messageId: 'layer', data: { from, to, specifier: source, allowed } });
          return;
        }
        const pkg = packageOf(source);
        const forbidden = row.forbiddenPackages ?? [];
        if (forbidden.includes('*') || forbidden.includes(pkg))
          context.report({ node, messageId: 'pkg', data: { from, pkg, specifier: source } });
      };
      return {
        ImportDeclaration: (node) => {
          check(node, node.source.value);
        },
        ExportNamedDeclaration: (node) => {
          if (node.source != null) check(node, node.source.value);
        },
        ExportAllDeclaration: (node) => {
          check(node, node.source.value);
        },
        ImportExpression: (node) => {
          if (node.source.type === 'Literal') check(node, node.source.value);
        },
      };
    },
  };
}
