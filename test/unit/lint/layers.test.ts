// The layer rule (hack/lint/layers.ts, wired in eslint.config.js as `fencepost/layers`): each
// rule of the table rejects a deliberately bad import placed virtually in the layer (ESLint's
// lintText with a filePath under src/), the allowed imports pass, and the real src/ tree is clean.
// Only this rule runs (ruleFilter) and without type information, so that the test stays fast;
// `npm run lint` runs it with everything else.
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ESLint } from 'eslint';
import { beforeAll, describe, expect, it } from 'vitest';
import { LAYERS } from '../../../hack/lint/layers.ts';

const root = resolve(import.meta.dirname, '../../..');
const RULE = 'fencepost/layers';

let eslint: ESLint;
beforeAll(() => {
  eslint = new ESLint({
    cwd: root,
    ruleFilter: ({ ruleId }) => ruleId === RULE,
    overrideConfig: { languageOptions: { parserOptions: { projectService: false } } },
  });
});

/** layerMessages lints `code` as if it were the file at `path` (relative to the repository) and returns the rule's messages. */
async function layerMessages(path: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: join(root, path) });
  const messages = result?.messages ?? [];
  const other = messages.filter((m) => m.ruleId !== RULE);
  expect(other, JSON.stringify(other)).toEqual([]); // a parse error would hide the rule
  return messages.map((m) => m.message);
}

describe('the layer rule rejects a bad import in each layer', () => {
  it.each([
    // protocol/ imports nothing of ours and no package
    {
      rule: 'protocol/ imports nothing of ours',
      path: 'src/protocol/bad.ts',
      code: "import { parseLease } from '../lease/record.ts';\nexport const x = parseLease;",
      says: 'protocol/ may not import lease/',
    },
    {
      rule: 'protocol/ imports no Kubernetes client',
      path: 'src/protocol/bad.ts',
      code: "import type { V1Lease } from '@kubernetes/client-node';\nexport type X = V1Lease;",
      says: 'protocol/ may not import the package @kubernetes/client-node',
    },
    {
      rule: 'protocol/ imports no package, not even a built-in',
      path: 'src/protocol/bad.ts',
      code: "import { createHash } from 'node:crypto';\nexport const x = createHash;",
      says: 'protocol/ may not import the package node:',
    },
    // runtime/ imports nothing of ours, not even the protocol
    {
      rule: 'runtime/ imports nothing of ours (not the protocol)',
      path: 'src/runtime/bad.ts',
      code: "import { leaseName } from '../protocol/names.ts';\nexport const x = leaseName;",
      says: 'runtime/ may not import protocol/',
    },
    {
      rule: 'runtime/ imports nothing of ours (not kube/)',
      path: 'src/runtime/bad.ts',
      code: "export { leaseClientFrom } from '../kube/leases.ts';",
      says: 'runtime/ may not import kube/',
    },
    // nothing imports cli/
    {
      rule: 'the library does not import cli/',
      path: 'src/client/bad.ts',
      code: "import { loadKubeConfig } from '../cli/kubeconfig.ts';\nexport const x = loadKubeConfig;",
      says: 'client/ may not import cli/',
    },
    {
      rule: 'the controller does not import cli/',
      path: 'src/controllers/distributedlock/bad.ts',
      code: "export * from '../../cli/main.ts';",
      says: 'controllers/ may not import cli/',
    },
    {
      rule: 'the agent does not import cli/ (dynamic import too)',
      path: 'src/agent/bad.ts',
      code: "export const x = () => import('../cli/exec.ts');",
      says: 'agent/ may not import cli/',
    },
    // controllers/ and agent/ never import each other
    {
      rule: 'controllers/ do not import agent/',
      path: 'src/controllers/distributedlock/bad.ts',
      code: "import type { LockSession } from '../../agent/session.ts';\nexport type X = LockSession;",
      says: 'controllers/ may not import agent/',
    },
    {
      rule: 'agent/ does not import controllers/',
      path: 'src/agent/bad.ts',
      code: "import { summarizePod } from '../controllers/distributedlock/pods.ts';\nexport const x = summarizePod;",
      says: 'agent/ may not import controllers/',
    },
    // guards/ import no Kubernetes client and nothing of kube/, controllers/, agent/, cli/
    {
      rule: 'guards/ import no Kubernetes client (not even a type)',
      path: 'src/guards/bad.ts',
      code: "import type { KubeConfig } from '@kubernetes/client-node';\nexport type X = KubeConfig;",
      says: 'guards/ may not import the package @kubernetes/client-node',
    },
    {
      rule: 'guards/ do not import kube/',
      path: 'src/guards/bad.ts',
      code: "import { podPatcherOver } from '../kube/pods.ts';\nexport const x = podPatcherOver;",
      says: 'guards/ may not import kube/',
    },
    {
      rule: 'guards/ do not import controllers/',
      path: 'src/guards/bad.ts',
      code: "import { decide } from '../controllers/distributedlock/decide.ts';\nexport const x = decide;",
      says: 'guards/ may not import controllers/',
    },
    {
      rule: 'guards/ do not import agent/',
      path: 'src/guards/bad.ts',
      code: "import { LockSession } from '../agent/session.ts';\nexport const x = LockSession;",
      says: 'guards/ may not import agent/',
    },
    {
      rule: 'guards/ do not import cli/',
      path: 'src/guards/bad.ts',
      code: "import { main } from '../cli/main.ts';\nexport const x = main;",
      says: 'guards/ may not import cli/',
    },
    {
      rule: 'guards/ do not import lease/ (it loads the Kubernetes client)',
      path: 'src/guards/bad.ts',
      code: "import { parseLease } from '../lease/record.ts';\nexport const x = parseLease;",
      says: 'guards/ may not import lease/',
    },
    // stores/ (Redis, Redlock) work without a cluster: no Kubernetes client, no session of the agent
    {
      rule: 'stores/ import no Kubernetes client',
      path: 'src/stores/bad.ts',
      code: "import type { V1Lease } from '@kubernetes/client-node';\nexport type X = V1Lease;",
      says: 'stores/ may not import the package @kubernetes/client-node',
    },
    {
      rule: 'stores/ do not import agent/',
      path: 'src/stores/redis/bad.ts',
      code: "import { LockSession } from '../../agent/session.ts';\nexport const x = LockSession;",
      says: 'stores/ may not import agent/',
    },
    // a folder that is not in the table
    {
      rule: 'a new src/ folder needs its row in the table',
      path: 'src/widgets/bad.ts',
      code: 'export const x = 1;',
      says: 'src/widgets/ is not in the layer table',
    },
  ])('$rule', async ({ path, code, says }) => {
    const messages = await layerMessages(path, code);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toContain(says);
  });
});

describe('the layer rule allows what the table allows', () => {
  it.each([
    {
      path: 'src/guards/ok.ts',
      code: "import { parseToken } from '../protocol/token.ts';\nimport type { Redis } from 'ioredis';\nimport { x } from './sql-guard.ts';\nexport type R = Redis;\nexport const y = [parseToken, x];",
    },
    {
      path: 'src/agent/ok.ts',
      code: "import { leaseName } from '../protocol/names.ts';\nimport { leaseClientFrom } from '../kube/leases.ts';\nimport { isConflict } from '../runtime/errors.ts';\nexport const x = [leaseName, leaseClientFrom, isConflict];",
    },
    {
      path: 'src/kube/ok.ts',
      code: "import { isNotFound } from '../runtime/errors.ts';\nimport { CoreV1Api } from '@kubernetes/client-node';\nexport const x = [isNotFound, CoreV1Api];",
    },
    {
      path: 'src/runtime/ok.ts',
      code: "import { Clock } from './clock.ts';\nimport { KubeConfig } from '@kubernetes/client-node';\nexport const x = [Clock, KubeConfig];",
    },
    {
      path: 'src/cli/ok.ts',
      code: "import { startLockController } from '../controllers/distributedlock/setup.ts';\nimport { LockSession } from '../agent/session.ts';\nexport const x = [startLockController, LockSession];",
    },
  ])('$path', async ({ path, code }) => {
    expect(await layerMessages(path, code)).toEqual([]);
  });
});

describe('the real tree', () => {
  it('every src/ folder has a row in the layer table', () => {
    const folders = readdirSync(join(root, 'src'), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
    expect(folders.filter((f) => LAYERS[f] === undefined)).toEqual([]);
  });

  // Linting every src/ file takes about 2 s alone and over 5 s (vitest's default) on a busy machine:
  // the bound only catches a hang.
  it('lints clean under the layer rule', { timeout: 60_000 }, async () => {
    const results = await eslint.lintFiles(['src/**/*.ts']);
    expect(results.length).toBeGreaterThan(40);
    expect(results.flatMap((r) => r.messages.map((m) => `${r.filePath}: ${m.message}`))).toEqual([]);
  });

  it('docs/design.md shows the same table', () => {
    const design = readFileSync(join(root, 'docs/design.md'), 'utf8');
    for (const [layer, row] of Object.entries(LAYERS)) {
      const name = layer === '(root)' ? '`src/index.ts`' : `\`${layer}/\``;
      const imports = row.imports.length > 0 ? row.imports.map((l) => `\`${l}/\``).join(', ') : '—';
      expect(design).toContain(`| ${name} | ${row.holds} | ${imports} |`);
    }
  });
});
