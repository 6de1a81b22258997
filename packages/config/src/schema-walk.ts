import type { z } from 'zod';
import { isPlainObject } from './paths.ts';

// A read-only view of zod 4 schema definitions: just enough to find the schema of a key, so that environment
// variables can be matched to keys without regard to case, values coerced to the kind a key expects, and unknown
// keys answered with the closest known one.

interface Def {
  readonly type: string;
  readonly innerType?: z.ZodType;
  readonly in?: z.ZodType;
  readonly shape?: Readonly<Record<string, z.ZodType>>;
  readonly valueType?: z.ZodType;
  readonly element?: z.ZodType;
  readonly options?: readonly z.ZodType[];
  readonly discriminator?: string;
  readonly entries?: Readonly<Record<string, unknown>>;
  readonly values?: readonly unknown[];
  readonly getter?: () => z.ZodType;
}

function defOf(schema: z.ZodType): Def {
  return (schema as unknown as { _zod: { def: Def } })._zod.def;
}

const WRAPPERS = new Set(['optional', 'nullable', 'default', 'prefault', 'readonly', 'catch', 'nonoptional']);

/** The schema under optional/default/prefault/pipe wrappers. */
export function unwrap(schema: z.ZodType): z.ZodType {
  let current = schema;
  for (;;) {
    const def = defOf(current);
    if (WRAPPERS.has(def.type) && def.innerType) current = def.innerType;
    else if (def.type === 'pipe' && def.in) current = def.in;
    else if (def.type === 'lazy' && def.getter) current = def.getter();
    else return current;
  }
}

/** What a position in the schema holds. */
export type SchemaKind = 'object' | 'record' | 'array' | 'union' | 'leaf';

/** The kind of the (unwrapped) schema. */
export function kindOf(schema: z.ZodType): SchemaKind {
  const type = defOf(unwrap(schema)).type;
  if (type === 'object' || type === 'record' || type === 'array' || type === 'union') return type;
  return 'leaf';
}

/** The union's option chosen by `value`'s discriminator, when it has one and it matches. */
function chosenOption(union: z.ZodType, value: unknown): z.ZodType | undefined {
  const def = defOf(union);
  if (!def.discriminator || !isPlainObject(value)) return undefined;
  const wanted = value[def.discriminator];
  return def.options?.find((option) => {
    const discriminant = objectShape(option)?.[def.discriminator ?? ''];
    return discriminant !== undefined && literalValues(discriminant).includes(wanted);
  });
}

function objectShape(schema: z.ZodType): Readonly<Record<string, z.ZodType>> | undefined {
  const def = defOf(unwrap(schema));
  return def.type === 'object' ? def.shape : undefined;
}

function literalValues(schema: z.ZodType): unknown[] {
  const def = defOf(unwrap(schema));
  if (def.type === 'literal') return [...(def.values ?? [])];
  if (def.type === 'enum') return Object.values(def.entries ?? {});
  return [];
}

/**
 * The object schemas that describe `value` at this position: the object itself, the chosen option of a
 * discriminated union, or every option when the discriminator does not choose one.
 */
function objectCandidates(schema: z.ZodType, value: unknown): z.ZodType[] {
  const inner = unwrap(schema);
  const def = defOf(inner);
  if (def.type === 'object') return [inner];
  if (def.type === 'union') {
    const chosen = chosenOption(inner, value);
    if (chosen) return objectCandidates(chosen, value);
    return (def.options ?? []).flatMap((option) => objectCandidates(option, value));
  }
  return [];
}

/** Keys an object position accepts (for a union without a matching discriminator: the keys of every option). */
export function knownKeys(schema: z.ZodType, value: unknown): string[] {
  const keys = new Set<string>();
  for (const candidate of objectCandidates(schema, value)) {
    for (const key of Object.keys(objectShape(candidate) ?? {})) keys.add(key);
  }
  return [...keys];
}

/** The schema of `key` (an object key, a record entry or an array index) inside `schema`, given its value. */
export function childSchema(schema: z.ZodType, key: string | number, value: unknown): z.ZodType | undefined {
  const inner = unwrap(schema);
  const def = defOf(inner);
  if (def.type === 'record') return def.valueType;
  if (def.type === 'array') return def.element;
  for (const candidate of objectCandidates(inner, value)) {
    const child = objectShape(candidate)?.[String(key)];
    if (child) return child;
  }
  return undefined;
}

/** The schema at `path` below `schema`, walking `root` alongside to choose union options. */
export function schemaAt(
  schema: z.ZodType,
  path: readonly (string | number)[],
  root: unknown,
): z.ZodType | undefined {
  let current: z.ZodType | undefined = schema;
  let value: unknown = root;
  for (const segment of path) {
    if (!current) return undefined;
    current = childSchema(current, segment, value);
    value =
      isPlainObject(value) || Array.isArray(value) ? (value as Record<string, unknown>)[segment] : undefined;
  }
  return current;
}

/** Primitive kinds a schema accepts. */
export type ValueKind = 'string' | 'number' | 'boolean' | 'array' | 'object' | 'unknown';

/** The kinds of value a schema position accepts. */
export function acceptedKinds(schema: z.ZodType): Set<ValueKind> {
  const inner = unwrap(schema);
  const def = defOf(inner);
  switch (def.type) {
    case 'string':
      return new Set(['string']);
    case 'number':
    case 'int':
      return new Set(['number']);
    case 'boolean':
      return new Set(['boolean']);
    case 'array':
      return new Set(['array']);
    case 'object':
    case 'record':
      return new Set(['object']);
    case 'enum':
    case 'literal': {
      const kinds = new Set<ValueKind>();
      for (const v of literalValues(inner)) kinds.add(typeof v === 'number' ? 'number' : 'string');
      return kinds;
    }
    case 'union': {
      const kinds = new Set<ValueKind>();
      for (const option of def.options ?? []) for (const k of acceptedKinds(option)) kinds.add(k);
      return kinds;
    }
    default:
      return new Set(['unknown']);
  }
}

/** The element schema of an array position, if it is one. */
export function elementSchema(schema: z.ZodType): z.ZodType | undefined {
  const def = defOf(unwrap(schema));
  return def.type === 'array' ? def.element : undefined;
}
