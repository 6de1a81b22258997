/**
 * The configuration of a fault-suite runtime, and a database URL with a password.
 * Nothing here imports vitest, so bench/soak.ts can use it too.
 */
// ------------------------------------------------------------------------------------------------------------
// Configuration of a fault-suite runtime

/** Options of {@link faultConfigYaml}. */
export interface FaultConfigOptions {
  readonly database: { readonly url: string; readonly schema: string; readonly poolSize?: number };
  readonly receiverUrl: string;
  readonly claimTimeoutMs?: number;
  readonly batchSize?: number;
  readonly maxAttempts?: number;
  /** Extra YAML appended under `sources:` (indented two spaces per level), e.g. hostile-input sources. */
  readonly sourcesYaml?: string;
  readonly adminToken?: string;
  readonly signingSecret?: string;
  readonly maxBodyBytes?: number;
}

/**
 * A runtime configuration: one http destination `receiver` (route `#` → receiver, so every topic reaches it), a
 * short outbox and relay lease (default 4000 ms; the outbox-tick and relay-tick function timeouts are lowered to
 * match, since validation requires lease > timeout, and so is the receiver's timeoutMs, to at most the lease − 2 s), quick back-off, info logs. `sourcesYaml` adds inbox sources.
 */
export function faultConfigYaml(options: FaultConfigOptions): string {
  const claimTimeoutMs = options.claimTimeoutMs ?? 4000;
  const tickSeconds = Math.max(1, Math.floor((claimTimeoutMs - 1) / 1000));
  // The configuration wants a lease of at least the longest destination timeout + 2 s (a batch ends with its lease).
  const receiverTimeoutMs = Math.min(10_000, claimTimeoutMs - 2000);
  const sources = options.sourcesYaml ? `sources:\n${options.sourcesYaml}` : '';
  const signing = options.signingSecret
    ? `\n    signing: { scheme: standard-webhooks, secrets: [${JSON.stringify(options.signingSecret)}] }`
    : '';
  const admin = options.adminToken ? `admin:\n  token: ${JSON.stringify(options.adminToken)}\n` : '';
  return `database:
  provider: postgres
  url: ${JSON.stringify(options.database.url)}
  schema: ${options.database.schema}
  poolSize: ${options.database.poolSize ?? 10}
http:
  port: 0
  host: 127.0.0.1
${admin}inbox:
  maxBodyBytes: ${options.maxBodyBytes ?? 1048576}
  relay:
    pollIntervalMs: 50
    claimTimeoutMs: ${claimTimeoutMs}
outbox:
  pollIntervalMs: 50
  batchSize: ${options.batchSize ?? 100}
  claimTimeoutMs: ${claimTimeoutMs}
  maxAttempts: ${options.maxAttempts ?? 25}
  backoff: { baseMs: 100, maxMs: 1000 }
aws:
  functions:
    outboxTick: { timeoutSeconds: ${tickSeconds} }
    relayTick: { timeoutSeconds: ${tickSeconds} }
${sources}destinations:
  receiver:
    type: http
    url: ${options.receiverUrl}
    timeoutMs: ${receiverTimeoutMs}${signing}
routes:
  - { match: "#", destination: receiver }
logLevel: info
`;
}

/** A PostgreSQL URL with a password added (trust authentication ignores it), to check it never leaks. */
export function withPassword(url: string, password: string): string {
  const parsed = new URL(url);
  parsed.password = password;
  return parsed.href;
}
