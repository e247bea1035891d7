/**
 * gen-crd-types.ts — the TypeScript shapes of the DistributedLock API, written by
 * hack/gen-protocol.ts from the CRD's openAPIV3Schema (crds/distributedlocks.fencepost.io.yaml).
 *
 * Why this direction (types from the schema, not the schema from types): the schema carries what
 * a TypeScript type cannot say — CEL rules with their messages, defaults, minimums and maximums,
 * patterns, list types, field descriptions that `kubectl explain` shows — and the API server is
 * what enforces it. Generated from the types, all of that would be annotations re-spelling the
 * YAML; generated from the schema, the CRD the cluster sees stays the file a reviewer reads, byte
 * for byte, and the types cannot drift from it. The names of the generated interfaces and enums
 * are the one thing the schema lacks: TYPE_NAMES and ENUM_NAMES below give them by field path.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { load } from 'js-yaml';

const root = resolve(import.meta.dirname, '..');

/** CRD_FILE is the source, relative to the repository root. */
export const CRD_FILE = 'crds/distributedlocks.fencepost.io.yaml';
/** CRD_TYPES_FILE is what this writes, relative to the repository root. */
export const CRD_TYPES_FILE = 'src/api/v1alpha1/distributedlock-schema.ts';

/** Schema is the part of an OpenAPI v3 schema node the generator reads. */
interface Schema {
  readonly type?: string;
  readonly description?: string;
  readonly properties?: Readonly<Record<string, Schema>>;
  readonly required?: readonly string[];
  readonly items?: Schema;
  readonly additionalProperties?: Schema | boolean;
  readonly enum?: readonly unknown[];
  readonly default?: unknown;
  readonly maximum?: number;
  readonly maxItems?: number;
  readonly pattern?: string;
}

interface Crd {
  readonly spec: {
    readonly group: string;
    readonly names: {
      readonly kind: string;
      readonly plural: string;
      readonly singular: string;
      readonly shortNames: readonly string[];
    };
    readonly versions: readonly { readonly name: string; readonly schema: { readonly openAPIV3Schema: Schema } }[];
  };
}

/** TYPE_NAMES: the interface of each object node, by field path (`[]` marks array items). */
const TYPE_NAMES: Readonly<Record<string, string>> = {
  spec: 'DistributedLockSpec',
  'spec.candidates': 'CandidatesSpec',
  'spec.candidates.selector': 'LabelSelector',
  'spec.candidates.selector.matchExpressions[]': 'LabelSelectorRequirement',
  'spec.fencing': 'FencingSpec',
  'spec.handoff': 'HandoffSpec',
  'spec.handover': 'HandoverSpec',
  status: 'DistributedLockStatus',
  'status.holders[]': 'PermitHolderStatus',
  'status.completedRuns[]': 'CompletedRun',
  'status.queue[]': 'QueuedRequest',
  'status.conditions[]': 'Condition',
};

/**
 * IMPORTED: object nodes typed by a type of src/protocol (what the agent and the controller share
 * beyond the CRD), with the properties the schema must give it.
 */
const IMPORTED: Readonly<
  Record<string, { readonly name: string; readonly from: string; readonly props: readonly string[] }>
> = {
  'status.holder': { name: 'HolderRef', from: '../../protocol/holder.ts', props: ['name', 'uid'] },
};

/** ENUM_NAMES: the enum of each enumerated string field, by field path. */
const ENUM_NAMES: Readonly<Record<string, string>> = {
  'spec.mode': 'LockMode',
  'spec.fencing.backend': 'FencingBackend',
  'spec.candidates.selector.matchExpressions[].operator': 'LabelSelectorOperator',
  'spec.store': 'LockStoreKind',
  'spec.preemption': 'Preemption',
  'status.conditions[].status': 'ConditionStatus',
};

/** readCrd parses the CRD file. */
function readCrd(): Crd {
  return load(readFileSync(resolve(root, CRD_FILE), 'utf8')) as Crd;
}

/** wrap breaks a paragraph into lines of at most `width` characters, at spaces. */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/ +/)) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  return [...lines, line];
}

/** doc renders a description as a TSDoc block at `indent`, wrapped at 100 columns. */
function doc(text: string, indent: string): string {
  if (text.includes('*/')) throw new Error(`${CRD_FILE}: a description holds "*/": ${text.slice(0, 60)}`);
  const width = 100 - indent.length - 3;
  const lines = text
    .trim()
    .split('\n')
    .flatMap((l) => (l === '' ? [''] : wrap(l, width)));
  if (lines.length === 1 && (lines[0] ?? '').length + indent.length + 7 <= 100) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} *${l === '' ? '' : ` ${l}`}`).join('\n')}\n${indent} */\n`;
}

/** at is the schema node at a field path, or undefined. */
function at(rootNode: Schema, path: string): Schema | undefined {
  let node: Schema | undefined = rootNode;
  for (const part of path.split('.')) {
    node = node?.properties?.[part.replace(/\[\]$/, '')];
    if (part.endsWith('[]')) node = node?.items;
  }
  return node;
}

/** crdGroup is the CRD's API group. */
export function crdGroup(): string {
  return readCrd().spec.group;
}

/** crdTypes returns the generated module's text. */
export function crdTypes(): string {
  const crd = readCrd();
  const version = crd.spec.versions[0];
  if (version === undefined || crd.spec.versions.length !== 1) throw new Error(`${CRD_FILE}: expected one version`);
  const schema = version.schema.openAPIV3Schema;
  const interfaces: string[] = [];
  const enums: string[] = [];
  const imports = new Map<string, Set<string>>();
  const paths: Record<'spec' | 'status', string[]> = { spec: [], status: [] };

  const typeOf = (s: Schema, path: string): string => {
    const enumName = ENUM_NAMES[path];
    if (enumName !== undefined) {
      const values = s.enum ?? [];
      if (s.type !== 'string' || values.length === 0 || !values.every((v) => typeof v === 'string'))
        throw new Error(`${CRD_FILE}: ${path} is named enum ${enumName} but has no string enum`);
      const members = (values as string[]).map((v) => `  ${v}: '${v}',`).join('\n');
      enums.push(
        `${doc(`${enumName}: the values of \`${path}\`. ${s.description ?? ''}`.trim(), '')}export const ${enumName} = {\n${members}\n} as const;\n/** ${enumName} is one of the values of the ${enumName} constant. */\nexport type ${enumName} = (typeof ${enumName})[keyof typeof ${enumName}];\n`,
      );
      return enumName;
    }
    if (s.enum !== undefined) throw new Error(`${CRD_FILE}: ${path} has an enum without a name in ENUM_NAMES`);
    switch (s.type) {
      case 'string':
        return 'string';
      case 'integer':
        return 'number';
      case 'boolean':
        return 'boolean';
      case 'array':
        if (s.items === undefined) throw new Error(`${CRD_FILE}: ${path} has no items`);
        return `readonly ${typeOf(s.items, `${path}[]`)}[]`;
      case 'object': {
        const imported = IMPORTED[path];
        if (imported !== undefined) {
          const props = Object.keys(s.properties ?? {});
          const required = s.required ?? [];
          if (props.join() !== imported.props.join() || required.join() !== imported.props.join())
            throw new Error(
              `${CRD_FILE}: ${path} must have exactly the required properties ${imported.props.join(', ')} of ${imported.name}`,
            );
          imports.set(imported.from, (imports.get(imported.from) ?? new Set()).add(imported.name));
          const top = path.split('.')[0];
          if (top === 'spec' || top === 'status') paths[top].push(...props.map((p) => `${path}.${p}`));
          return imported.name;
        }
        if (s.properties === undefined) {
          const values = s.additionalProperties;
          if (typeof values === 'object' && values.type === 'string') return 'Readonly<Record<string, string>>';
          throw new Error(`${CRD_FILE}: ${path}: an object needs properties or string additionalProperties`);
        }
        const name = TYPE_NAMES[path];
        if (name === undefined) throw new Error(`${CRD_FILE}: ${path} is an object without a name in TYPE_NAMES`);
        const required = new Set(s.required ?? []);
        for (const r of required)
          if (s.properties[r] === undefined) throw new Error(`${CRD_FILE}: ${path} requires ${r}, which it lacks`);
        const fields = Object.entries(s.properties).map(([prop, child]) => {
          const childPath = `${path}.${prop}`;
          const top = childPath.split('.')[0];
          if (top === 'spec' || top === 'status') paths[top].push(childPath);
          const t = typeOf(child, childPath);
          return `${doc(child.description ?? '', '  ')}  readonly ${prop}${required.has(prop) ? '' : '?'}: ${t};\n`;
        });
        interfaces.push(
          `${doc(s.description ?? `${name} is \`${path}\`.`, '')}export interface ${name} {\n${fields.join('')}}\n`,
        );
        return name;
      }
      default:
        throw new Error(`${CRD_FILE}: ${path} has unsupported type ${String(s.type)}`);
    }
  };

  for (const top of ['spec', 'status'] as const) {
    const node = schema.properties?.[top];
    if (node === undefined) throw new Error(`${CRD_FILE}: no ${top}`);
    typeOf(node, top);
  }

  const number = (path: string, key: 'maximum' | 'maxItems'): number => {
    const v = at(schema, path)?.[key];
    if (typeof v !== 'number') throw new Error(`${CRD_FILE}: ${path} has no ${key}`);
    return v;
  };
  const defaultOf = (path: string): unknown => {
    const v = at(schema, path)?.default;
    if (v === undefined) throw new Error(`${CRD_FILE}: ${path} has no default`);
    return v;
  };
  const tokenPattern = at(schema, 'status.fencingToken')?.pattern;
  if (tokenPattern === undefined) throw new Error(`${CRD_FILE}: status.fencingToken has no pattern`);
  const mode = defaultOf('spec.mode');
  const names = crd.spec.names;
  const shortName = names.shortNames[0];
  if (shortName === undefined) throw new Error(`${CRD_FILE}: no short name`);
  const constants = `/** GROUP is the API group of DistributedLock. */
export const GROUP = '${crd.spec.group}';
/** VERSION is the served and stored version. */
export const VERSION = '${version.name}';
/** KIND is the kind. */
export const KIND = '${names.kind}';
/** PLURAL is the resource name. */
export const PLURAL = '${names.plural}';
/** SINGULAR is the singular resource name. */
export const SINGULAR = '${names.singular}';
/** SHORT_NAME is the short name kubectl accepts. */
export const SHORT_NAME = '${shortName}';

/** DEFAULT_MODE is the schema default of \`spec.mode\`. */
export const DEFAULT_MODE: LockMode = LockMode.${String(mode)};
/** DEFAULT_HANDOFF_ON_POD_TERMINATED is the schema default of \`spec.handoff.onPodTerminated\`. */
export const DEFAULT_HANDOFF_ON_POD_TERMINATED = ${JSON.stringify(defaultOf('spec.handoff.onPodTerminated'))};
/**
 * MAX_PERMITS is the schema maximum of \`spec.permits\`: the controller reads every permit Lease of a
 * lock on each reconcile, and status lists every holder, so both stay bounded.
 */
export const MAX_PERMITS = ${number('spec.permits', 'maximum')};
/** MAX_QUEUED_REQUESTS is the schema's maxItems of \`status.queue\`. */
export const MAX_QUEUED_REQUESTS = ${number('status.queue', 'maxItems')};
/**
 * FENCING_TOKEN_PATTERN is the schema's pattern of \`status.fencingToken\`: a decimal integer without
 * sign or leading zeros. Parse matching strings with \`BigInt\`, never \`Number\` (tokens can exceed 2^53).
 */
export const FENCING_TOKEN_PATTERN = /${tokenPattern}/;
`;
  const pathList = (name: string, what: string, list: readonly string[]): string =>
    `/** ${name} is every field path under \`${what}\`, parents first, \`[]\` marking array items. */\nexport const ${name}: readonly string[] = [\n${list.map((p) => `  '${p}',`).join('\n')}\n];\n`;
  const importLines = [...imports].map(
    ([from, ns]) => `import type { ${[...ns].sort().join(', ')} } from '${from}';\n`,
  );
  return `// generated by hack/gen-protocol.ts; do not edit.
// From ${CRD_FILE}'s openAPIV3Schema; run \`node hack/gen-protocol.ts\` after changing it.
${importLines.join('')}
${enums.join('\n')}
${constants}
${interfaces.join('\n')}
${pathList('SPEC_FIELD_PATHS', 'spec', paths.spec)}
${pathList('STATUS_FIELD_PATHS', 'status', paths.status)}`;
}
