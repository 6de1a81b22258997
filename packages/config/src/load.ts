import { resolve } from 'node:path';
import { ConfigError, type ConfigIssue } from '@queuebox/core';
import { overlayEnv } from './env-overlay.ts';
import { createSecretsManagerResolver, resolveReferences, type SecretResolver } from './references.ts';
import type { QueueBoxConfig } from './schema.ts';
import { validateConfig } from './validate.ts';
import { readConfigFile } from './yaml-file.ts';

/** The file read when neither `options.file` nor `QUEUEBOX_CONFIG` names one. */
export const DEFAULT_CONFIG_FILE = 'queuebox.yaml';

/** Where {@link loadConfig} reads from. */
export interface LoadConfigOptions {
  /** YAML file to read; a missing file is an error. Default: `QUEUEBOX_CONFIG`, else `queuebox.yaml` in `cwd` (optional). */
  readonly file?: string;
  /** Environment for `QUEUEBOX_` keys, `QUEUEBOX_CONFIG` and `env://` references. Default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Directory that relative file paths start from. Default `process.cwd()`. */
  readonly cwd?: string;
  /** Reads `secret://` references. Default: AWS Secrets Manager, client created on first use, cached per name. */
  readonly secrets?: SecretResolver;
  /**
   * Reads every `secret://` value anew, past the resolver's cache: for a reload that must see a rotated secret (the
   * Lambda shell's scheduled reload, and the one after the database refused the credentials). Default false.
   */
  readonly freshSecrets?: boolean;
}

let sharedSecrets: SecretResolver | undefined;

// One resolver per process, so a warm Lambda reuses its client and cache across loads.
function defaultSecrets(): SecretResolver {
  sharedSecrets ??= createSecretsManagerResolver();
  return sharedSecrets;
}

/**
 * Loads the configuration: the YAML file, then `QUEUEBOX_` environment variables over it, then `secret://` and
 * `env://` references resolved, then validation. Throws core's `ConfigError` listing every problem with its path
 * and origin (`file:line` or the variable's name). Without any file the configuration is all defaults plus the
 * environment.
 */
export async function loadConfig(options: LoadConfigOptions = {}): Promise<QueueBoxConfig> {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const fromEnv = env.QUEUEBOX_CONFIG === '' ? undefined : env.QUEUEBOX_CONFIG;
  const named = options.file ?? fromEnv;
  const display = named ?? DEFAULT_CONFIG_FILE;
  const doc = await readConfigFile(resolve(cwd, display), display);
  if (doc === undefined && named !== undefined) {
    throw new ConfigError([
      {
        path: '',
        message: `the configuration file ${display} does not exist`,
        origin: options.file !== undefined ? display : 'QUEUEBOX_CONFIG',
      },
    ]);
  }
  if (doc !== undefined && !doc.usable) throw new ConfigError(doc.issues);

  const origins = doc?.origins ?? new Map<string, string>();
  const fileOrigins = new Map(origins);
  const overlay = overlayEnv(doc?.value ?? {}, env, origins);
  // A value with a YAML problem (an unknown tag, a key set twice, an alias without its anchor) is not what was
  // meant: its schema and reference problems, and those of everything under it, would only be noise. A value a
  // variable replaced is checked again.
  const yamlIssues = doc?.issues ?? [];
  const doubtful = yamlIssues
    .map((issue) => issue.path)
    .filter((path) => fileOrigins.has(path) && origins.get(path) === fileOrigins.get(path));
  const clear = (issue: ConfigIssue): boolean => !doubtful.some((path) => within(issue.path, path));
  const resolved = await resolveReferences(overlay.value, {
    env,
    secrets: options.secrets ?? defaultSecrets(),
    origins,
    ...(options.freshSecrets === true ? { freshSecrets: true } : {}),
  });
  // A value whose reference failed still holds the reference text; its shape problems would only be noise.
  const unresolved = new Set(resolved.issues.map((i) => i.path));
  const validation = validateConfig(resolved.value, origins, {
    defaultOrigin: doc === undefined ? 'defaults' : display,
    references: resolved.references,
  });
  const issues: ConfigIssue[] = [
    ...yamlIssues,
    ...overlay.issues,
    ...resolved.issues.filter(clear),
    ...(validation.ok ? [] : validation.issues.filter((i) => !unresolved.has(i.path) && clear(i))),
  ];
  if (issues.length > 0 || !validation.ok) throw new ConfigError(issues);
  return validation.config;
}

/** Whether the formatted `path` is `ancestor` or lies under it (the root `''` holds every path). */
function within(path: string, ancestor: string): boolean {
  return (
    ancestor === '' || path === ancestor || path.startsWith(`${ancestor}.`) || path.startsWith(`${ancestor}[`)
  );
}
