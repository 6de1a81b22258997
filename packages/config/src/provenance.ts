import type { ConfigOrigins } from './paths.ts';

/** Where a loaded configuration's values came from. */
export interface ConfigProvenance {
  /** Formatted path → file:line or environment variable. Keys absent here took their default. */
  readonly origins: ConfigOrigins;
  /** Formatted paths whose values were resolved from `secret://` or `env://` references. */
  readonly references: ReadonlySet<string>;
}

// Kept beside the config rather than inside it, so the config stays a plain value that is safe to spread and log
// (after redaction) and its type stays exactly the schema's.
const registry = new WeakMap<object, ConfigProvenance>();

/** Records the provenance of a configuration object. */
export function attachProvenance(config: object, provenance: ConfigProvenance): void {
  registry.set(config, provenance);
}

/** The provenance of a configuration returned by `loadConfig`/`parseConfig`, if it is known. */
export function provenanceOf(config: object): ConfigProvenance | undefined {
  return registry.get(config);
}
