/**
 * gen-protocol.ts — writes what must repeat the protocol's facts in another form, from their one
 * source, so that the copies cannot drift:
 * - the TypeScript constants that carry the shared Lua scripts of clients/conformance (the Redis
 *   guard's fenced write, the fencing-token dispenser, the lock stores' acquire, renew, release and
 *   Redlock raise), which the Go, Python and Java clients load from the same files (their own
 *   tests compare their copies with clients/conformance);
 * - the chart's wire names (charts/fencepost/templates/_wire.tpl) from src/protocol: the Lease
 *   names, labels and annotations and the per-lock pod keys that the admission policies check.
 *
 * Why generated constants and not files read at run time: the TypeScript code ships compiled by
 * tsc (`files: dist/src`), bundled by Bun into the agent executable and copied into the image;
 * a `.lua` file beside the sources would have to be copied into each of them and found by a path
 * relative to the compiled module. A string constant goes wherever the module goes.
 * - the DistributedLock API's TypeScript shapes (src/api/v1alpha1/distributedlock-schema.ts) from
 *   the CRD's schema (hack/gen-crd-types.ts says why in that direction);
 * - the Go, Python and Java clients' constants and composed Lua scripts (hack/gen-protocol-clients.ts
 *   says what and why).
 *
 * Usage: node hack/gen-protocol.ts           rewrites every generated file
 *        node hack/gen-protocol.ts --check   writes nothing; exits 1 naming each stale file
 * test/unit/conformance/vectors.test.ts runs the check, so CI fails while a generated file is stale.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { CLIENT_FILES } from './gen-protocol-clients.ts';
import { CRD_TYPES_FILE, crdGroup, crdTypes } from './gen-crd-types.ts';
import { HANDOVER_MARK_ANNOTATION } from '../src/protocol/handover.ts';
import {
  LEASE_PREFIX,
  LOCK_KEY_SUFFIX,
  LOCK_LABEL,
  PERMIT_LEASE_PREFIX,
  podKeys,
  RELEASE_ANNOTATION,
  RENEW_DEADLINE_ANNOTATION,
  RENEW_PERIOD_ANNOTATION,
  TOKEN_ANNOTATION,
  type ReleaseKind,
} from '../src/protocol/names.ts';

const root = resolve(import.meta.dirname, '..');

/** CONFORMANCE_DIR holds the shared scripts, relative to the repository root. */
export const CONFORMANCE_DIR = 'clients/conformance';

/** LuaConstant is one exported constant: the script file it carries, and what it is. */
export interface LuaConstant {
  readonly name: string;
  /** file: in CONFORMANCE_DIR. */
  readonly file: string;
  readonly doc: string;
}

/** GeneratedModule is one TypeScript module the generator writes. */
export interface GeneratedModule {
  /** path: relative to the repository root. */
  readonly path: string;
  readonly constants: readonly LuaConstant[];
}

/** MODULES: every generated module. The Lua files' headers document keys, arguments and answers. */
export const MODULES: readonly GeneratedModule[] = [
  {
    path: 'src/guards/redis-fenced-write-lua.ts',
    constants: [
      {
        name: 'FENCED_WRITE_LUA',
        file: 'redis-fenced-write.lua',
        doc: `the Redis guard's script: KEYS[1] = data key, KEYS[2] = mark key (high-water mark), KEYS[3] = write
 * id set; ARGV[1] = token (canonical decimal), ARGV[2] = value, ARGV[3] = write id or '' for none,
 * ARGV[4] = idempotency window in ms, ARGV[5] = operation: 'set' (SET the data key to the value),
 * 'del' (DEL the data key) or 'fence' (only raise the mark; KEYS[1] is not touched). Returns
 * {outcome, mark} with outcome 'applied', 'duplicate' or 'stale' and mark the high-water mark
 * after the call ('' when there is none). A rejected or duplicate call never changes the data or
 * the mark. The token is validated here too (defence in depth), and a mark that is not a
 * canonical token fails the call instead of being compared.`,
      },
    ],
  },
  {
    path: 'src/protocol/fence-next-lua.ts',
    constants: [
      {
        name: 'FENCE_NEXT_FUNCTION_LUA',
        file: 'fence-next.lua',
        doc: `defines the Lua functions fence_greater(a, b) and fence_next(key, floor): the
 * fencing-token dispenser's whole step on one counter key (fencing/redis-fence.ts). Scripts that
 * issue a token with a grant start with it (stores/redis/scripts.ts, stores/redlock/scripts.ts).`,
      },
    ],
  },
  {
    path: 'src/stores/store-lua.ts',
    constants: [
      {
        name: 'STORE_ACQUIRE_BODY_LUA',
        file: 'store-acquire.lua',
        doc: 'the single-Redis grant, run after FENCE_NEXT_FUNCTION_LUA (stores/redis/scripts.ts ACQUIRE_LUA).',
      },
      { name: 'STORE_RENEW_LUA', file: 'store-renew.lua', doc: 'the watchdog\u2019s compare-and-PEXPIRE.' },
      { name: 'STORE_RELEASE_LUA', file: 'store-release.lua', doc: 'compare-and-DEL, then PUBLISH to waiters.' },
      {
        name: 'REDLOCK_ACQUIRE_BODY_LUA',
        file: 'redlock-acquire.lua',
        doc: 'one Redlock master\u2019s part of a grant, run after FENCE_NEXT_FUNCTION_LUA.',
      },
      {
        name: 'REDLOCK_RAISE_BODY_LUA',
        file: 'redlock-raise.lua',
        doc: 'raise a Redlock master\u2019s counter to the token, run after FENCE_NEXT_FUNCTION_LUA.',
      },
    ],
  },
];

/** readLua reads one shared script. */
export function readLua(file: string): string {
  return readFileSync(resolve(root, CONFORMANCE_DIR, file), 'utf8');
}

/** generatedModule returns the text of module `m`, with the scripts as `read` returns them. */
export function generatedModule(m: GeneratedModule, read: (file: string) => string = readLua): string {
  const files = m.constants.map((c) => `${CONFORMANCE_DIR}/${c.file}`).join(', ');
  const body = m.constants.map((c) => {
    const lua = read(c.file);
    if (/[`\\]|\$\{/.test(lua)) throw new Error(`${c.file}: a backtick, backslash or \${ would need escaping`);
    return `/**
 * ${c.name} is ${CONFORMANCE_DIR}/${c.file}, shared by every client: ${c.doc}
 */
export const ${c.name} = \`${lua}\`;
`;
  });
  return `// Generated by hack/gen-protocol.ts from ${files}: do not edit; edit the .lua files and run
// \`node hack/gen-protocol.ts\`. test/unit/conformance/vectors.test.ts checks that they agree.

${body.join('\n')}`;
}

/** WIRE_TEMPLATE is the chart's generated file of wire names, relative to the repository root. */
export const WIRE_TEMPLATE = 'charts/fencepost/templates/_wire.tpl';

/** markOf is the part of a per-lock pod key after `<lock>.lock.fencepost.io/`. */
function markOf(key: string): string {
  return key.slice(key.indexOf('/') + 1);
}

/**
 * wireTemplate returns the chart's named templates `fencepost.wire.*`: each protocol name the
 * admission policies check, as src/protocol spells it. A CEL list is spelled as CEL writes it.
 */
export function wireTemplate(): string {
  const k = podKeys('x');
  const celList = (xs: readonly string[]): string => `[${xs.map((x) => `'${x}'`).join(', ')}]`;
  const annotationMarks = [k.token, k.lease, k.acquireTime, k.expireTime].map(markOf);
  const holderMarks = [markOf(k.holder), ...annotationMarks];
  const requests = [k.request, k.runId].map(markOf);
  const released: ReleaseKind = 'Released';
  const names: readonly (readonly [string, string, string])[] = [
    ['group', crdGroup(), 'the API group of DistributedLock'],
    ['leasePrefix', LEASE_PREFIX, "starts a lock's Lease name"],
    ['permitLeasePrefix', PERMIT_LEASE_PREFIX, "starts a Semaphore permit's Lease name"],
    ['lockLabel', LOCK_LABEL, "on a lock's Leases: the lock's name"],
    ['tokenAnnotation', TOKEN_ANNOTATION, "the Lease's token high-water mark"],
    ['releaseAnnotation', RELEASE_ANNOTATION, 'how the last holder left'],
    ['released', released, 'its value when the holder released'],
    ['renewDeadlineAnnotation', RENEW_DEADLINE_ANNOTATION, "the term's renew deadline (ms)"],
    ['renewPeriodAnnotation', RENEW_PERIOD_ANNOTATION, "the term's renew period (ms)"],
    ['handoverMarkAnnotation', HANDOVER_MARK_ANNOTATION, "a planned handover's successor"],
    ['podKeySuffix', `${LOCK_KEY_SUFFIX}/`, 'ends the prefix of every per-lock key on a pod, before the mark'],
    ['holderMark', markOf(k.holder), "the holder label's mark"],
    ['holderMarksCel', celList(holderMarks), 'the holder marks the controller keeps on a pod (CEL list)'],
    ['holderMarksBraced', `{${holderMarks.join(',')}}`, 'the same, for messages'],
    ['annotationMarksCel', celList(annotationMarks), 'the holder marks that are annotations (CEL list)'],
    ['annotationMarksBraced', `{${annotationMarks.join(',')}}`, 'the same, for messages'],
    ['requestMarksCel', celList(requests), 'what an agent writes on its own pod (CEL list)'],
    ['requestMarksBraced', `{${requests.join(',')}}`, 'the same, for messages'],
  ];
  const defines = names.map(
    ([name, value, doc]) => `{{- /* ${doc} */}}\n{{- define "fencepost.wire.${name}" -}}${value}{{- end }}\n`,
  );
  return `{{- /* Generated by hack/gen-protocol.ts from src/protocol: do not edit; change the protocol and
run \`node hack/gen-protocol.ts\`. test/unit/conformance/vectors.test.ts checks that they agree. */}}
${defines.join('')}`;
}

/** GENERATED: every file the generator writes (relative to the repository root) and its text. */
export const GENERATED: readonly { readonly path: string; readonly text: () => string }[] = [
  ...MODULES.map((m) => ({ path: m.path, text: () => generatedModule(m) })),
  { path: WIRE_TEMPLATE, text: wireTemplate },
  ...CLIENT_FILES,
  { path: CRD_TYPES_FILE, text: crdTypes },
];

/** staleFiles lists the generated files whose content is not what the generator writes now. */
export function staleFiles(): string[] {
  return GENERATED.filter((g) => {
    const file = resolve(root, g.path);
    return !existsSync(file) || readFileSync(file, 'utf8') !== g.text();
  }).map((g) => g.path);
}

if (import.meta.filename === process.argv[1]) {
  if (process.argv.includes('--check')) {
    const stale = staleFiles();
    for (const path of stale) process.stderr.write(`stale: ${path}\n`);
    if (stale.length > 0) {
      process.stderr.write('gen-protocol: run `node hack/gen-protocol.ts` and commit what it writes\n');
      process.exit(1);
    }
    process.stdout.write(`gen-protocol: ${GENERATED.length} generated files are current\n`);
  } else {
    for (const g of GENERATED) {
      writeFileSync(resolve(root, g.path), g.text());
      process.stdout.write(`wrote ${g.path}\n`);
    }
  }
}
