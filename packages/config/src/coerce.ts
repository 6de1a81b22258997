import { parse } from 'yaml';
import type { z } from 'zod';
import { isPlainObject } from './paths.ts';
import { acceptedKinds, elementSchema, type ValueKind } from './schema-walk.ts';

const FAILED = Symbol('unparsable');

function parseYaml(raw: string, schema: 'core' | 'failsafe'): unknown {
  try {
    return parse(raw, { schema });
  } catch {
    return FAILED;
  }
}

function kindOfValue(value: unknown): ValueKind {
  if (Array.isArray(value)) return 'array';
  if (isPlainObject(value)) return 'object';
  if (typeof value === 'string') return 'string';
  if (typeof value === 'number') return 'number';
  if (typeof value === 'boolean') return 'boolean';
  return 'unknown';
}

/** How text that arrives outside YAML (an environment variable, a resolved reference) is read. */
export interface CoerceOptions {
  /**
   * Whether YAML flow syntax is understood (`[a, b]`, `{ k: v }`). True for environment variables; false for
   * resolved references, whose text is a value and never structure.
   */
  readonly flow: boolean;
}

/**
 * Reads text as the value the schema position expects: a string position keeps the text as is (so a token such
 * as `0123` stays a string), numbers and booleans are read as YAML scalars, and a list position takes YAML flow
 * syntax or a single item. Anything unreadable is returned as text for the schema to refuse.
 */
export function coerceText(raw: string, schema: z.ZodType | undefined, options: CoerceOptions): unknown {
  const kinds = schema ? acceptedKinds(schema) : new Set<ValueKind>(['unknown']);
  if (kinds.has('array') && schema) {
    const element = elementSchema(schema);
    const elementKinds = element ? acceptedKinds(element) : new Set<ValueKind>(['unknown']);
    const textOnly =
      elementKinds.has('string') && !elementKinds.has('number') && !elementKinds.has('boolean');
    if (options.flow && raw.trim().startsWith('[')) {
      const list = parseYaml(raw, textOnly ? 'failsafe' : 'core');
      if (Array.isArray(list)) return list;
    }
    return [coerceText(raw, element, options)];
  }
  if (kinds.has('unknown') && !options.flow) return raw;
  const parsed = parseYaml(raw, 'core');
  if (parsed === FAILED) return raw;
  const kind = kindOfValue(parsed);
  if ((kind === 'array' || kind === 'object') && !options.flow) return raw;
  if (kind !== 'string' && kind !== 'unknown' && (kinds.has(kind) || kinds.has('unknown'))) return parsed;
  if (kinds.has('string')) return raw;
  return parsed;
}
