// What the shipped agent can load: the modules Bun bundled into dist/bin/fencepost-agent (its
// metafile's inputs), built here from the working tree by hack/build-agent.ts. A module that is not
// in the bundle cannot be loaded by the executable, so this is the whole of the agent's path —
// `fencepost-agent agent` and `fencepost-agent exec` — with no flag or branch left untried.
import { describe, expect, it } from 'vitest';
import { buildAgent, packageOf } from '../../../hack/build-agent.ts';

const HANG_BOUND_MS = 120_000;

describe('the compiled agent (dist/bin/fencepost-agent)', () => {
  // Before the agent had its own transport it bundled both: 1,154 modules with
  // @kubernetes/client-node and ioredis among 44 packages.
  it(
    'bundles no Kubernetes client library, no Redis client and no controller code',
    () => {
      const { inputs } = buildAgent();
      const packages = new Set(inputs.filter((p) => p.includes('node_modules/')).map(packageOf));
      expect([...packages].filter((p) => p === '@kubernetes/client-node' || p === 'ioredis')).toEqual([]);
      expect(inputs.filter((p) => p.startsWith('src/controllers/') || p.startsWith('src/fencing/'))).toEqual([]);
      expect(inputs).toContain('src/agent/session.ts');
      expect(inputs).toContain('src/cli/exec.ts');
    },
    HANG_BOUND_MS,
  );

  // Each package a sidecar loads is memory of every pod (docs/benchmarks.md, "Agent"): it logs
  // through observability/logger.ts and parses a YAML kubeconfig with Bun's own parser.
  it(
    'bundles no npm package at all: no logging library, no YAML parser',
    () => {
      const { inputs } = buildAgent();
      expect(inputs.filter((p) => p.includes('node_modules/')).map(packageOf)).toEqual([]);
    },
    HANG_BOUND_MS,
  );
});
