export { AWS_CLIENT_DEFAULTS, AWS_CLIENT_WORST_CASE_MS } from './aws-clients.ts';
export { closestMatch, editDistance } from './did-you-mean.ts';
export {
  LEASE_REQUEST_MARGIN_MS,
  leaseRequestMs,
  minimumLeaseMs,
  PUBLISH_WAIT_DEFAULT_MS,
} from './drain-budget.ts';
export {
  ENV_PREFIX,
  type EnvOverlay,
  envVarFor,
  isReservedEnvVar,
  overlayEnv,
  RESERVED_ENV_PREFIXES,
  RESERVED_ENV_VARS,
} from './env-overlay.ts';
export { DEFAULT_CONFIG_FILE, type LoadConfigOptions, loadConfig } from './load.ts';
export { type ConfigOrigins, type ConfigPath, formatPath, isPlainObject, originOf } from './paths.ts';
export { type ConfigProvenance, provenanceOf } from './provenance.ts';
export { REDACTED, redactConfig, redactConnectionString, SENSITIVE_KEY } from './redact.ts';
export {
  createInMemorySecretResolver,
  createSecretsManagerResolver,
  parseReference,
  type Reference,
  type ResolvedReferences,
  type ResolveReferencesOptions,
  resolveReferences,
  SECRET_CACHE_MAX_AGE_SECONDS,
  type SecretResolver,
  type SecretsManagerResolverOptions,
} from './references.ts';
export { relayRuns } from './relay.ts';
export * from './schema.ts';
export { type ConfigValidation, parseConfig, type ValidateOptions, validateConfig } from './validate.ts';
export { type ConfigWarning, configWarnings, patternsOverlap, SOURCE_SECRET_MIN_LENGTH } from './warnings.ts';
export { type ConfigDocument, parseConfigYaml, readConfigFile } from './yaml-file.ts';
