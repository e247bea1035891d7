/**
 * Finding the API server's settings, in the order `loadKubeConfig` (client-node's loadFromDefault)
 * has always used: the --kubeconfig file when given; else the files of $KUBECONFIG (merged as
 * kubectl merges them); else ~/.kube/config if it exists; else the pod's in-cluster
 * ServiceAccount (when its token file exists). Unlike client-node, nothing found is an error
 * rather than a silent http://localhost:8080.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { load as jsYamlLoad } from 'js-yaml';
import {
  ConfigError,
  SERVICE_ACCOUNT_DIR,
  UnknownContextError,
  inClusterConfig,
  mergeKubeconfigs,
  parseKubeconfig,
  type ClusterConfig,
} from './config.ts';

/** LoadConfigOptions are the seams of {@link loadClusterConfig}; every field defaults to the process's own. */
export interface LoadConfigOptions {
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly home?: string;
  /** serviceAccountDir: where the ServiceAccount is mounted; default {@link SERVICE_ACCOUNT_DIR}. */
  readonly serviceAccountDir?: string;
  /** context: the kubeconfig context to use instead of its current-context (kubectl's --context). */
  readonly context?: string | undefined;
}

/**
 * loadClusterConfig finds and parses the settings (module comment). `path` is --kubeconfig.
 *
 * @throws ConfigError when a file cannot be read or parsed (naming it), or nothing is found.
 */
export function loadClusterConfig(path: string | undefined, o: LoadConfigOptions = {}): ClusterConfig {
  const ctx = o.context;
  if (path !== undefined) return parseKubeconfig(readKubeconfig(path), path, ctx);
  const env = o.env ?? process.env;
  const list = (env.KUBECONFIG ?? '').split(delimiter).filter((f) => f !== '');
  if (list.length === 1) return parseKubeconfig(readKubeconfig(list[0] ?? ''), list[0] ?? '', ctx);
  if (list.length > 1) return parseKubeconfig(mergeKubeconfigs(list.map(readKubeconfig)), list[0] ?? '', ctx);
  const home = o.home ?? homedir();
  const own = join(home, '.kube', 'config');
  if (home !== '' && existsSync(own)) return parseKubeconfig(readKubeconfig(own), own, ctx);
  if (ctx !== undefined) throw new UnknownContextError('in-cluster', ctx, []);
  const saDir = o.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  if (existsSync(join(saDir, 'token'))) {
    let namespace: string | undefined;
    try {
      namespace = readFileSync(join(saDir, 'namespace'), 'utf8');
    } catch {
      namespace = undefined;
    }
    return inClusterConfig(env, saDir, namespace);
  }
  throw new ConfigError(
    `no API server configured: no --kubeconfig, no $KUBECONFIG, no ${own}, and no ServiceAccount token at ${join(saDir, 'token')}`,
  );
}

/** YamlLoad parses one YAML document; `source` names it in errors. */
type YamlLoad = (text: string, source: string) => unknown;

/** BunYaml is the YAML parser the Bun runtime has built in (`Bun.YAML`), when it has one. */
type BunYaml = { readonly YAML?: { readonly parse?: (text: string) => unknown } } | undefined;

let yamlLoad: YamlLoad | undefined;

/**
 * yamlParser is loaded on the first YAML kubeconfig, not with this module: a sidecar in a pod
 * reads its ServiceAccount and parses no YAML, and js-yaml's module costs every agent memory it
 * would never use (bench/agent-imports.ts). Under Bun (the compiled agent) it is Bun's built-in
 * parser, so the executable bundles no YAML library; under Node, js-yaml. Both follow YAML 1.2's
 * core schema and read kubectl's documents alike (test/unit/transport/config.test.ts parses the
 * same documents with both); the one difference found is a merge key (`<<`), which Bun merges, as
 * kubectl does, and js-yaml keeps as a key.
 */
function yamlParser(): YamlLoad {
  if (yamlLoad !== undefined) return yamlLoad;
  const bun = (globalThis as { readonly Bun?: BunYaml }).Bun?.YAML?.parse;
  if (bun !== undefined) {
    yamlLoad = (text) => bun(text);
  } else {
    const { load } = createRequire(import.meta.url)('js-yaml') as { load: typeof jsYamlLoad };
    yamlLoad = (text, source) => load(text, { filename: source });
  }
  return yamlLoad;
}

/**
 * parseKubeconfigText parses a kubeconfig's YAML (or JSON, a subset) text; `source` names it in
 * errors. JSON (what client-node's `exportConfig()` writes, and a form kubectl reads) needs no
 * YAML parser.
 */
export function parseKubeconfigText(text: string, source: string): unknown {
  try {
    if (text.trimStart().startsWith('{')) {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        /* a YAML flow mapping that is not JSON: the YAML parser reads it */
      }
    }
    return yamlParser()(text, source);
  } catch (err) {
    throw new ConfigError(`${source}: not a YAML kubeconfig: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function readKubeconfig(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`kubeconfig ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  return parseKubeconfigText(text, file);
}
