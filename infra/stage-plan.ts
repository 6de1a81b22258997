import { isIP } from 'node:net';
import { type ConfigPath, formatPath, originOf, type QueueBoxConfig } from '@queuebox/config';
import type { ConfigIssue } from '@queuebox/core';
import type { DeployConfig } from './config.ts';

// What only a development stage may deploy. The shipped queuebox.yaml is a local demo: a destination on the
// loopback address (on Lambda that is the function itself: every delivery fails, then goes dead) and Standard
// Webhooks secrets printed in the repository (anyone can sign webhooks for an install that keeps them). A deploy
// to any other stage refuses both, naming the file, line and key to change.

/**
 * Secrets published in this repository (queuebox.yaml, scripts/demo-webhook.sh): never valid outside a
 * development stage, whatever the key that holds them.
 */
export const DEMO_SECRETS: readonly string[] = [
  'whsec_cXVldWVib3gtZGVtby1zb3VyY2UtZGV2LW9ubHk=',
  'whsec_cXVldWVib3gtZGVtby1yZWNlaXZlci1kZXYtb25seQ==',
];

/** Stage names that count as development ones, besides the deploying user's own (SST's default stage). */
export const DEVELOPMENT_STAGES: readonly string[] = ['dev', 'development', 'local', 'sandbox'];

/**
 * Whether `stage` is a development stage: one of {@link DEVELOPMENT_STAGES}, a name starting `dev-` or ending
 * `-dev`, or the deploying user's name (`sst deploy` without `--stage` uses it). Pure.
 */
export function isDevelopmentStage(stage: string, user?: string): boolean {
  const name = stage.toLowerCase();
  return (
    DEVELOPMENT_STAGES.includes(name) ||
    name.startsWith('dev-') ||
    name.endsWith('-dev') ||
    (user !== undefined && user !== '' && name === user.toLowerCase())
  );
}

/**
 * Whether a host name or address is one the deployed functions cannot mean: loopback (127.0.0.0/8, ::1,
 * `localhost`, `*.localhost`), link-local (169.254.0.0/16, which holds the instance metadata endpoints, and
 * fe80::/10) or unspecified (0.0.0.0, ::). Pure.
 */
export function isLocalOnlyHost(host: string): boolean {
  const name = host
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  const kind = isIP(name);
  if (kind === 4) {
    const [a, b] = name.split('.').map(Number);
    return a === 127 || a === 0 || (a === 169 && b === 254);
  }
  if (kind === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(name);
    if (mapped?.[1] !== undefined) return isLocalOnlyHost(mapped[1]);
    return name === '::1' || name === '::' || /^fe[89ab][0-9a-f]:/.test(name);
  }
  return false;
}

/** The host of a URL or of a `host:port` broker address; `undefined` when it has none. */
function hostOf(address: string): string | undefined {
  try {
    return new URL(address.includes('://') ? address : `tcp://${address}`).hostname || undefined;
  } catch {
    return undefined;
  }
}

/** Every address a destination sends to, with its path. */
function destinationAddresses(config: QueueBoxConfig): { path: ConfigPath; address: string }[] {
  const found: { path: ConfigPath; address: string }[] = [];
  for (const [name, destination] of Object.entries(config.destinations)) {
    const at = ['destinations', name];
    switch (destination.type) {
      case 'http':
      case 'rabbitmq':
        found.push({ path: [...at, 'url'], address: destination.url });
        break;
      case 'kafka':
        destination.brokers.forEach((address, i) => {
          found.push({ path: [...at, 'brokers', i], address });
        });
        break;
      case 'nats':
        destination.servers.forEach((address, i) => {
          found.push({ path: [...at, 'servers', i], address });
        });
        break;
    }
  }
  return found;
}

/** Every string in the document, with its path (where demo secrets may hide: auth, signing, headers). */
function strings(value: unknown, path: (string | number)[] = []): { path: ConfigPath; text: string }[] {
  if (typeof value === 'string') return [{ path, text: value }];
  if (Array.isArray(value)) return value.flatMap((item, i) => strings(item, [...path, i]));
  if (typeof value === 'object' && value !== null) {
    return Object.entries(value).flatMap(([key, item]) => strings(item, [...path, key]));
  }
  return [];
}

/**
 * On a stage that is not a development one: a destination on a loopback, link-local or unspecified address, and
 * any of the {@link DEMO_SECRETS} anywhere in the configuration, each as an issue with its key and origin.
 */
export function planStageChecks(
  loaded: Pick<DeployConfig, 'config' | 'document' | 'origins' | 'file'>,
  stage: string,
  user?: string,
): ConfigIssue[] {
  if (isDevelopmentStage(stage, user)) return [];
  const issues: ConfigIssue[] = [];
  const origin = (path: ConfigPath) => originOf(loaded.origins, path) ?? loaded.file;
  const where = (path: ConfigPath) => {
    const from = origin(path);
    return from === undefined ? {} : { origin: from };
  };
  for (const { path, address } of destinationAddresses(loaded.config)) {
    const host = hostOf(address);
    if (host !== undefined && isLocalOnlyHost(host)) {
      issues.push({
        path: formatPath(path),
        message: `sends to ${host}, a loopback or link-local address: on Lambda that is the function itself, not your receiver. Point ${formatPath(path)}${origin(path) ? ` in ${origin(path)}` : ''} at the real endpoint before deploying stage "${stage}" (only development stages may keep the local demo)`,
        ...where(path),
      });
    }
  }
  for (const { path, text } of strings(loaded.document)) {
    if (!DEMO_SECRETS.includes(text)) continue;
    issues.push({
      path: formatPath(path),
      message: `is the public demo secret of queuebox.yaml: anyone can sign requests with it. Replace ${formatPath(path)}${origin(path) ? ` in ${origin(path)}` : ''} with secret://… (then \`npx sst secret set\`) before deploying stage "${stage}"`,
      ...where(path),
    });
  }
  return issues;
}

/** Static headers of a destination whose values are credentials (as the inbox's CREDENTIAL_NAME reads names). */
const CREDENTIAL_HEADER =
  /(?:^|[-_.])(?:authorization|auth|token|secret|password|signature|cookie|api[-_]?key|apikey|(?:access|subscription|functions?|sas|private|client)[-_]?key)(?:[-_.]|$)/i;

/** Whether a written string at `path` is a credential by its place: a secret list, a static credential header. */
function isCredentialPath(path: readonly (string | number)[]): boolean {
  const [section, , ...rest] = path;
  if (section !== 'sources' && section !== 'destinations') return false;
  // sources.<name>.auth.secrets[i], destinations.<name>.signing.secrets[i]
  if (rest.length === 3 && (rest[0] === 'auth' || rest[0] === 'signing') && rest[1] === 'secrets')
    return true;
  // destinations.<name>.headers.<header>
  return (
    section === 'destinations' &&
    rest.length === 2 &&
    rest[0] === 'headers' &&
    CREDENTIAL_HEADER.test(String(rest[1]))
  );
}

/** Whether a written string is a URL carrying credentials (a password, or a credential-named query value). */
function hasUrlCredentials(text: string): boolean {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) return false;
  try {
    const url = new URL(text);
    if (url.password !== '' || (url.protocol === 'nats:' && url.username !== '')) return true;
    return [...url.searchParams.keys()].some((name) =>
      /(code|key|token|sig|secret|pass|pwd|auth|cred)/i.test(name),
    );
  } catch {
    return false;
  }
}

/**
 * On a stage that is not a development one: the credentials written as literal values in the document (file and
 * `QUEUEBOX_` overlay), not as `secret://` references — a source's auth secrets, a destination's signing secrets and
 * credential headers, URLs with a password or a credential in their query. They are shipped in plain text in every
 * function's code bundle (`/var/task/queuebox.yaml`) and in `.queuebox/deploy/<stage>/` (an outside audit). A warning,
 * not a refusal: the deployer may accept it. The public demo secrets are refused instead (planStageChecks).
 */
export function planLiteralCredentialWarnings(
  loaded: Pick<DeployConfig, 'document'>,
  stage: string,
  user?: string,
): string[] {
  if (isDevelopmentStage(stage, user)) return [];
  const literal = strings(loaded.document)
    // Only what is shipped as written: infra supplies the database section itself.
    .filter(({ path }) => path[0] === 'sources' || path[0] === 'destinations')
    .filter(({ text }) => !/^(secret|env):\/\//.test(text) && !DEMO_SECRETS.includes(text))
    .filter(({ path, text }) => isCredentialPath(path) || hasUrlCredentials(text))
    .map(({ path }) => formatPath(path));
  if (literal.length === 0) return [];
  return [
    `${literal.join(', ')} ${literal.length === 1 ? 'holds a credential' : 'hold credentials'} written as literal text: on stage "${stage}" it is shipped in plain text in every function's code bundle (/var/task/queuebox.yaml) and in .queuebox/deploy/${stage}/. Write secret://<name> instead (then \`npx sst secret set <Name> …\`), which infra keeps in Secrets Manager.`,
  ];
}

/**
 * What a deploy of a stage that is not a development one warns about without refusing it: alarms that notify nobody.
 * `aws.alarms.email` defaults to `[]`, and then the alarm topic has no subscriber infra knows of (one subscribed
 * outside infra, Chatbot or PagerDuty on the `alarmTopic` output, cannot be seen from the plan, hence a warning).
 */
export function planStageWarnings(config: QueueBoxConfig, stage: string, user?: string): string[] {
  if (isDevelopmentStage(stage, user) || config.aws.alarms.email.length > 0) return [];
  return [
    `aws.alarms.email is empty: the alarms of stage "${stage}" (dead rows, oldest pending age, ingest failures, function errors) notify an SNS topic nobody subscribes to. List addresses in aws.alarms.email (each confirms one subscription mail), or subscribe your own endpoint (Chatbot, PagerDuty, a Lambda) to the alarmTopic output.`,
  ];
}
