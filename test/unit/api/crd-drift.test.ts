// Fails when the TypeScript shapes generated from the CRD (src/api/v1alpha1/distributedlock-schema.ts,
// from crds/distributedlocks.fencepost.io.yaml, the one source of the schema) are stale, or when the
// CRD disagrees with the protocol's constants and the rule messages the code names; and checks that
// the CRD's schema is structural, documented and self-consistent. CEL rules are only checked for
// references to fields that exist; their behaviour is tested against a real API server.
import { DEFAULT_DRAIN_SECONDS, MAX_DRAIN_SECONDS } from '../../../src/protocol/handover.ts';
import { readFileSync } from 'node:fs';
import { loadYaml } from '@kubernetes/client-node';
import type {
  V1CustomResourceDefinition,
  V1CustomResourceDefinitionVersion,
  V1JSONSchemaProps,
  V1ValidationRule,
} from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  API_VERSION,
  CRD_NAME,
  DEFAULT_HANDOFF_ON_POD_TERMINATED,
  DEFAULT_LEASE_DURATION_SECONDS,
  DEFAULT_MODE,
  GROUP,
  KIND,
  LockMode,
  MAX_PERMITS,
  PLURAL,
  SHORT_NAME,
  SINGULAR,
  SPEC_FIELD_PATHS,
  STATUS_FIELD_PATHS,
  ValidationMessage,
  VERSION,
} from '../../../src/api/v1alpha1/distributedlock.ts';
import type { DistributedLock } from '../../../src/api/v1alpha1/distributedlock.ts';
import { leaseName } from '../../../src/protocol/names.ts';
import { CRD_TYPES_FILE, crdTypes } from '../../../hack/gen-crd-types.ts';

const repoFile = (path: string): string => readFileSync(new URL(`../../../${path}`, import.meta.url), 'utf8');

function must<T>(value: T | undefined | null, what: string): T {
  if (value === undefined || value === null) throw new Error(`CRD has no ${what}`);
  return value;
}

const crd = loadYaml<V1CustomResourceDefinition>(repoFile('crds/distributedlocks.fencepost.io.yaml'));
const version: V1CustomResourceDefinitionVersion = must(crd.spec.versions[0], 'version');
const root: V1JSONSchemaProps = must(version.schema?.openAPIV3Schema, 'openAPIV3Schema');
const specSchema = must(root.properties?.['spec'], 'spec schema');
const statusSchema = must(root.properties?.['status'], 'status schema');

// ----- Reading schema nodes -----
// loadYaml turns typed schema nodes into V1JSONSchemaProps, renaming some keys (enum → _enum,
// x-kubernetes-validations → x_kubernetes_validations), but leaves the nodes under `items` and
// `additionalProperties` (typed `any`) as raw YAML. These accessors read both spellings.

type Raw = Readonly<Record<string, unknown>>;

function attr(s: V1JSONSchemaProps, typedName: keyof V1JSONSchemaProps, rawName: string): unknown {
  return s[typedName] ?? (s as unknown as Raw)[rawName];
}
const enumOf = (s: V1JSONSchemaProps): unknown => attr(s, '_enum', 'enum');
const defaultOf = (s: V1JSONSchemaProps): unknown => attr(s, '_default', 'default');
const rulesOf = (s: V1JSONSchemaProps): readonly V1ValidationRule[] =>
  (attr(s, 'x_kubernetes_validations', 'x-kubernetes-validations') as V1ValidationRule[] | undefined) ?? [];
const preservesUnknown = (s: V1JSONSchemaProps): unknown =>
  attr(s, 'x_kubernetes_preserve_unknown_fields', 'x-kubernetes-preserve-unknown-fields');
const itemsOf = (s: V1JSONSchemaProps): V1JSONSchemaProps => must(s.items as V1JSONSchemaProps | undefined, 'items');
const valuesOf = (s: V1JSONSchemaProps): V1JSONSchemaProps | undefined =>
  typeof s.additionalProperties === 'object' ? (s.additionalProperties as V1JSONSchemaProps) : undefined;

/** at returns the schema node at a field path such as `spec.candidates.selector.matchExpressions[].key`. */
function at(path: string): V1JSONSchemaProps {
  let node = root;
  for (const part of path.split('.')) {
    const name = part.replace(/\[\]$/, '');
    node = must(node.properties?.[name], `field ${path}`);
    if (part.endsWith('[]')) node = itemsOf(node);
  }
  return node;
}

/** walk yields every schema node under `s` with its field path (`[]` marks array items). */
function* walk(s: V1JSONSchemaProps, path: string): Generator<[string, V1JSONSchemaProps]> {
  yield [path, s];
  for (const [name, child] of Object.entries(s.properties ?? {})) yield* walk(child, `${path}.${name}`);
  if (s.type === 'array') yield* walk(itemsOf(s), `${path}[]`);
  const values = valuesOf(s);
  if (values !== undefined) yield* walk(values, `${path}{}`);
}

const allRules = (): { path: string; node: V1JSONSchemaProps; rule: V1ValidationRule }[] =>
  [...walk(root, '')].flatMap(([path, node]) => rulesOf(node).map((rule) => ({ path, node, rule })));

// ----- A minimal structural validator, for fixtures (no CEL, no formats) -----

/** structuralErrors lists how `value` violates the OpenAPI constraints of `s` (not its CEL rules). */
function structuralErrors(value: unknown, s: V1JSONSchemaProps, path: string): string[] {
  const errors: string[] = [];
  const fail = (why: string): void => void errors.push(`${path}: ${why}`);
  const allowed = enumOf(s);
  if (Array.isArray(allowed) && !allowed.includes(value))
    fail(`${JSON.stringify(value)} is not one of ${allowed.join(', ')}`);
  switch (s.type) {
    case 'string':
      if (typeof value !== 'string') return [`${path}: expected a string`];
      if (s.maxLength !== undefined && value.length > s.maxLength) fail(`longer than ${s.maxLength}`);
      if (s.minLength !== undefined && value.length < s.minLength) fail(`shorter than ${s.minLength}`);
      if (s.pattern !== undefined && !new RegExp(s.pattern).test(value)) fail(`does not match ${s.pattern}`);
      break;
    case 'integer':
      if (typeof value !== 'number' || !Number.isInteger(value)) return [`${path}: expected an integer`];
      if (s.minimum !== undefined && value < s.minimum) fail(`less than ${s.minimum}`);
      if (s.maximum !== undefined && value > s.maximum) fail(`greater than ${s.maximum}`);
      break;
    case 'boolean':
      if (typeof value !== 'boolean') return [`${path}: expected a boolean`];
      break;
    case 'array':
      if (!Array.isArray(value)) return [`${path}: expected an array`];
      if (s.maxItems !== undefined && value.length > s.maxItems) fail(`more than ${s.maxItems} items`);
      value.forEach((item, i) => errors.push(...structuralErrors(item, itemsOf(s), `${path}[${i}]`)));
      break;
    case 'object': {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return [`${path}: expected an object`];
      const entries = Object.entries(value);
      if (s.maxProperties !== undefined && entries.length > s.maxProperties)
        fail(`more than ${s.maxProperties} entries`);
      for (const name of s.required ?? []) if (!(name in value)) fail(`missing required field ${name}`);
      const values = valuesOf(s);
      for (const [name, child] of entries) {
        const childSchema = s.properties?.[name] ?? values;
        if (childSchema === undefined) fail(`unknown field ${name} (would be pruned)`);
        else if (s.properties !== undefined || values !== undefined)
          errors.push(...structuralErrors(child, childSchema, `${path}.${name}`));
      }
      break;
    }
    default:
      fail(`unsupported schema type ${String(s.type)}`);
  }
  return errors;
}

/** lockErrors validates the spec and status of a lock object against the CRD. */
const lockErrors = (lock: unknown): string[] => {
  const { spec, status } = lock as { spec?: unknown; status?: unknown };
  return [
    ...(spec === undefined ? ['spec: missing'] : structuralErrors(spec, specSchema, 'spec')),
    ...(status === undefined ? [] : structuralErrors(status, statusSchema, 'status')),
  ];
};

/** aFullLock sets every field of the TypeScript model, so that the CRD must accept all of them. */
const aFullLock: DistributedLock = {
  apiVersion: API_VERSION,
  kind: KIND,
  metadata: { name: 'billing', namespace: 'default' },
  spec: {
    leaseDurationSeconds: 15,
    renewDeadlineSeconds: 10,
    renewPeriodSeconds: 5,
    candidates: {
      selector: {
        matchLabels: { app: 'billing', 'example.com/tier': 'backend' },
        matchExpressions: [
          { key: 'track', operator: 'In', values: ['stable', 'canary'] },
          { key: 'example.com/drain', operator: 'DoesNotExist' },
        ],
      },
    },
    mode: 'Mutex',
    fencing: { backend: 'Redis', key: 'fencepost:fence:default/billing' },
    lockDelaySeconds: 0,
    handoff: { onPodTerminated: false },
  },
  status: {
    holder: { name: 'billing-7d9f-abcde', uid: '0f8e1c2a-4b3d-4e5f-8a9b-0c1d2e3f4a5b' },
    fencingToken: '9007199254740993',
    acquireTime: '2024-05-01T12:00:00Z',
    leaseDurationSeconds: 15,
    leaseTransitions: 3,
    leaseName: leaseName('billing'),
    candidates: 2,
    queueLength: 1,
    heldPermits: 1,
    holders: [
      {
        permit: 0,
        name: 'billing-7d9f-abcde',
        uid: '0f8e1c2a-4b3d-4e5f-8a9b-0c1d2e3f4a5b',
        token: '9007199254740993',
        acquireTime: '2024-05-01T12:00:00Z',
        leaseDurationSeconds: 15,
      },
    ],
    observedGeneration: 4,
    conditions: [
      {
        type: 'Ready',
        status: 'True',
        observedGeneration: 4,
        lastTransitionTime: '2024-05-01T12:00:00Z',
        reason: 'Granted',
        message: 'Held by billing-7d9f-abcde.',
      },
    ],
  },
};

// ----- Tests -----

describe('the DistributedLock CRD', () => {
  it('has the names, scope and version that the TypeScript constants declare', () => {
    expect(crd.metadata?.name).toBe(CRD_NAME);
    expect(crd.spec.group).toBe(GROUP);
    expect(crd.spec.scope).toBe('Namespaced');
    expect(crd.spec.names).toMatchObject({
      kind: KIND,
      plural: PLURAL,
      singular: SINGULAR,
      shortNames: [SHORT_NAME],
      categories: ['fencepost'],
    });
    expect(crd.spec.versions.map((v) => v.name)).toEqual([VERSION]);
    expect(API_VERSION).toBe(`${crd.spec.group}/${version.name}`);
    expect(version).toMatchObject({ served: true, storage: true });
    expect(version.subresources?.status).toEqual({});
  });

  describe('agrees with the TypeScript code', () => {
    it(`is what ${CRD_TYPES_FILE} is generated from (run node hack/gen-protocol.ts after changing the CRD)`, () => {
      expect(repoFile(CRD_TYPES_FILE)).toBe(crdTypes());
    });

    it('only in required fields that exist', () => {
      for (const [path, node] of walk(root, '')) {
        for (const name of node.required ?? [])
          expect(node.properties, `${path} requires ${name}`).toHaveProperty([name]);
      }
    });

    it.each([
      { path: 'spec.leaseDurationSeconds', value: DEFAULT_LEASE_DURATION_SECONDS },
      { path: 'spec.mode', value: DEFAULT_MODE },
      { path: 'spec.handoff', value: {} },
      { path: 'spec.handoff.onPodTerminated', value: DEFAULT_HANDOFF_ON_POD_TERMINATED },
      { path: 'spec.handover', value: {} },
      { path: 'spec.handover.drainSeconds', value: DEFAULT_DRAIN_SECONDS },
      { path: 'spec.preemption', value: 'Never' },
    ])('in the default of $path', ({ path, value }) => {
      expect(defaultOf(at(path))).toEqual(value);
    });

    it('only in defaults on the fields that declare them', () => {
      const defaulted = [...walk(root, '')].filter(([, node]) => defaultOf(node) !== undefined).map(([path]) => path);
      expect(defaulted.sort()).toEqual([
        '.spec.handoff',
        '.spec.handoff.onPodTerminated',
        '.spec.handover',
        '.spec.handover.drainSeconds',
        '.spec.leaseDurationSeconds',
        '.spec.mode',
        '.spec.preemption',
        '.spec.store',
      ]);
    });

    it('in the bounds of spec.handover.drainSeconds', () => {
      expect(at('spec.handover.drainSeconds')).toMatchObject({
        type: 'integer',
        minimum: 0,
        maximum: MAX_DRAIN_SECONDS,
      });
    });

    it('in the bounds of spec.permits', () => {
      expect(at('spec.permits')).toMatchObject({ type: 'integer', minimum: 1, maximum: MAX_PERMITS });
    });

    it('in the message of every validation rule', () => {
      expect(
        allRules()
          .map(({ rule }) => rule.message)
          .sort(),
      ).toEqual(Object.values(ValidationMessage).sort());
    });
  });

  describe('is a well-formed schema', () => {
    it('prunes unknown fields everywhere', () => {
      const preserving = [...walk(root, '')]
        .filter(([, node]) => preservesUnknown(node) !== undefined)
        .map(([path]) => path);
      expect(preserving).toEqual([]);
    });

    it('documents every spec and status field', () => {
      const undocumented = [...walk(specSchema, 'spec'), ...walk(statusSchema, 'status')]
        .filter(([path, node]) => !path.endsWith('{}') && !(path.endsWith('[]') && node.type !== 'object'))
        .filter(([, node]) => (node.description ?? '').trim() === '')
        .map(([path]) => path);
      expect(undocumented).toEqual([]);
    });

    it('states the default of every optional spec field', () => {
      const optional = [...walk(specSchema, 'spec')].flatMap(([path, node]) =>
        Object.entries(node.properties ?? {})
          .filter(([name]) => !(node.required ?? []).includes(name))
          .map(([name, child]) => ({ path: `${path}.${name}`, description: child.description ?? '' })),
      );
      expect(
        optional.filter(({ description }) => !/Defaults to|When unset/.test(description)).map(({ path }) => path),
      ).toEqual([]);
    });

    it('bounds every spec string and list that a validation rule reads', () => {
      expect(at('spec.candidates.selector.matchLabels').maxProperties).toBe(32);
      expect(at('spec.candidates.selector.matchExpressions').maxItems).toBe(32);
      expect(at('spec.candidates.selector.matchExpressions[].values').maxItems).toBe(64);
      expect(itemsOf(at('spec.candidates.selector.matchExpressions[].values')).maxLength).toBe(63);
      expect(at('spec.candidates.selector.matchExpressions[].key').maxLength).toBe(317);
      expect(at('spec.fencing.key').maxLength).toBe(512);
      expect(at('spec.fencing.backend').maxLength).toBe(5);
      expect(at('spec.candidates.selector.matchExpressions[].operator').maxLength).toBe(12);
      expect(at('spec.mode').maxLength).toBe(9);
    });

    it('allows every enumerated value within the maximum length of its field', () => {
      for (const [path, node] of walk(root, '')) {
        const values = enumOf(node);
        if (!Array.isArray(values) || node.maxLength === undefined) continue;
        for (const value of values)
          expect(String(value).length, `${path} ${String(value)}`).toBeLessThanOrEqual(node.maxLength);
      }
    });

    it('gives every validation rule a message', () => {
      for (const { path, rule } of allRules()) expect(rule.message, `rule at ${path || 'the root'}`).toMatch(/\S/);
    });

    it('refers only to existing fields in validation rules and their field paths', () => {
      for (const { path, node, rule } of allRules()) {
        const names = [...rule.rule.matchAll(/\bself\.(\w+)\b(?!\s*\()/g)].map((m) => must(m[1], 'match'));
        if (rule.fieldPath !== undefined) names.push(rule.fieldPath.replace(/^\./, ''));
        for (const name of names)
          expect(node.properties, `${rule.rule} at ${path || 'the root'}`).toHaveProperty([name]);
      }
    });

    it('has balanced parentheses and brackets in every validation rule', () => {
      for (const { rule } of allRules()) {
        let depth = 0;
        for (const ch of rule.rule.replace(/'[^']*'/g, "''")) {
          if (ch === '(' || ch === '[') depth++;
          if (ch === ')' || ch === ']') depth--;
          expect(depth, rule.rule).toBeGreaterThanOrEqual(0);
        }
        expect(depth, rule.rule).toBe(0);
      }
    });

    it('prints columns that exist in the schema, with how long the holder has held it (from acquireTime, which renewals do not change) rather than its expiry', () => {
      const columns = must(version.additionalPrinterColumns, 'printer columns');
      expect(columns.map((c) => [c.name, c.jsonPath, c.type, c.priority ?? 0])).toEqual([
        ['Ready', '.status.conditions[?(@.type=="Ready")].status', 'string', 0],
        ['Holder', '.status.holder.name', 'string', 0],
        ['Token', '.status.fencingToken', 'string', 0],
        ['Held-For', '.status.acquireTime', 'date', 0],
        ['Mode', '.spec.mode', 'string', 1],
        ['Store', '.spec.store', 'string', 1],
        ['Transitions', '.status.leaseTransitions', 'integer', 1],
        ['Held', '.status.heldPermits', 'integer', 1],
        ['Permits', '.spec.permits', 'integer', 1],
        ['Age', '.metadata.creationTimestamp', 'date', 0],
      ]);
      const known = new Set([...SPEC_FIELD_PATHS, ...STATUS_FIELD_PATHS]);
      for (const c of columns.filter((col) => !col.jsonPath.startsWith('.metadata.'))) {
        // A filter on a list (`conditions[?(@.type=="Ready")]`) names its items: `conditions[]`.
        expect(known, c.jsonPath).toContain(c.jsonPath.slice(1).replace(/\[\?\(.*?\)\]/g, '[]'));
      }
    });

    it('lets kubectl select locks by holder (a field selector on status.holder.name, a string field)', () => {
      expect(version.selectableFields?.map((f) => f.jsonPath)).toEqual(['.status.holder.name']);
      expect(at('status.holder.name').type).toBe('string');
    });
  });

  describe('accepts and rejects objects structurally', () => {
    it('accepts a lock that sets every field of the TypeScript model', () => {
      expect(lockErrors(aFullLock)).toEqual([]);
    });

    it('accepts examples/basic-lock.yaml', () => {
      const example = loadYaml<DistributedLock>(repoFile('examples/basic-lock.yaml'));
      expect(example).toMatchObject({ apiVersion: API_VERSION, kind: KIND, metadata: { name: 'billing' } });
      expect(lockErrors(example)).toEqual([]);
    });

    it('accepts a Semaphore lock with its permits', () => {
      expect(lockErrors({ spec: { ...aFullLock.spec, mode: LockMode.Semaphore, permits: MAX_PERMITS } })).toEqual([]);
    });

    const withSpec = (spec: Record<string, unknown>): unknown => ({ spec: { ...aFullLock.spec, ...spec } });
    it.each([
      {
        name: 'a lock without candidates',
        lock: { spec: { leaseDurationSeconds: 15 } },
        error: 'spec: missing required field candidates',
      },
      {
        name: 'an unknown spec field',
        lock: withSpec({ leaseDuration: '15s' }),
        error: 'spec: unknown field leaseDuration (would be pruned)',
      },
      {
        name: 'a zero lease duration',
        lock: withSpec({ leaseDurationSeconds: 0 }),
        error: 'spec.leaseDurationSeconds: less than 1',
      },
      {
        name: 'a lease longer than an hour',
        lock: withSpec({ leaseDurationSeconds: 3601 }),
        error: 'spec.leaseDurationSeconds: greater than 3600',
      },
      {
        name: 'a fractional lease duration',
        lock: withSpec({ leaseDurationSeconds: 1.5 }),
        error: 'spec.leaseDurationSeconds: expected an integer',
      },
      {
        name: 'an unknown mode',
        lock: withSpec({ mode: 'Leader' }),
        error: 'spec.mode: "Leader" is not one of Election, Mutex, Semaphore',
      },
      {
        name: 'zero permits',
        lock: withSpec({ mode: 'Semaphore', permits: 0 }),
        error: 'spec.permits: less than 1',
      },
      {
        name: 'more permits than MAX_PERMITS',
        lock: withSpec({ mode: 'Semaphore', permits: MAX_PERMITS + 1 }),
        error: `spec.permits: greater than ${MAX_PERMITS}`,
      },
      {
        name: 'an unknown fencing backend',
        lock: withSpec({ fencing: { backend: 'Etcd' } }),
        error: 'spec.fencing.backend: "Etcd" is not one of Redis, Lease',
      },
      {
        name: 'a negative lock delay',
        lock: withSpec({ lockDelaySeconds: -1 }),
        error: 'spec.lockDelaySeconds: less than 0',
      },
      {
        name: 'a fencing key with a space',
        lock: withSpec({ fencing: { key: 'a b' } }),
        error: 'spec.fencing.key: does not match ^[!-~]+$',
      },
      {
        name: 'a label value longer than 63 characters',
        lock: withSpec({ candidates: { selector: { matchLabels: { app: 'x'.repeat(64) } } } }),
        error: 'spec.candidates.selector.matchLabels.app: longer than 63',
      },
      {
        name: 'a selector requirement without an operator',
        lock: withSpec({ candidates: { selector: { matchExpressions: [{ key: 'app' }] } } }),
        error: 'spec.candidates.selector.matchExpressions[0]: missing required field operator',
      },
      {
        name: 'a malformed label key in a selector requirement',
        lock: withSpec({ candidates: { selector: { matchExpressions: [{ key: '-app', operator: 'Exists' }] } } }),
        error: expect.stringMatching(
          /^spec\.candidates\.selector\.matchExpressions\[0\]\.key: does not match/,
        ) as unknown,
      },
      {
        name: 'a fencing token with a leading zero',
        lock: { spec: aFullLock.spec, status: { fencingToken: '007' } },
        error: 'status.fencingToken: does not match ^(0|[1-9][0-9]*)$',
      },
      {
        name: 'a condition with an unknown status',
        lock: {
          spec: aFullLock.spec,
          status: {
            conditions: [
              {
                type: 'Ready',
                status: 'Maybe',
                lastTransitionTime: '2024-05-01T12:00:00Z',
                reason: 'Granted',
                message: '',
              },
            ],
          },
        },
        error: 'status.conditions[0].status: "Maybe" is not one of True, False, Unknown',
      },
    ])('rejects $name', ({ lock, error }) => {
      expect(lockErrors(lock)).toEqual([error]);
    });
  });
});
