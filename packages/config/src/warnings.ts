import { CONFIG_DEFAULTS, renderTemplate, topicSegments } from '@queuebox/core';
import { ADMIN_TOKEN_MIN_LENGTH, type QueueBoxConfig } from './schema.ts';

/** Something valid that is probably not what the operator meant; `config check` prints it, nothing refuses it. */
export interface ConfigWarning {
  /** Dotted path of the key, e.g. `routes[0].match`. */
  readonly path: string;
  readonly message: string;
}

// Stands for the event type while a template is rendered: a character no configured literal can hold.
const EVENT_TYPE = '\u0000';

/**
 * The topics a source's template can render, as a route pattern: its literal segments, `#` for a segment that holds
 * the sender's event type (an event type may contain dots, so it may stand for any number of segments).
 */
function topicShape(template: string, source: string): string[] {
  const rendered = renderTemplate(template, { source, eventType: EVENT_TYPE });
  return topicSegments(rendered).map((segment) => (segment.includes(EVENT_TYPE) ? '#' : segment));
}

/** Whether some topic matches both patterns (`*` one segment, `#` any number, literals exactly). */
export function patternsOverlap(a: readonly string[], b: readonly string[]): boolean {
  const memo = new Map<number, boolean>();
  const at = (i: number, j: number): boolean => {
    const key = i * (b.length + 1) + j;
    const known = memo.get(key);
    if (known !== undefined) return known;
    let result: boolean;
    if (i === a.length && j === b.length) result = true;
    else if (i < a.length && a[i] === '#') result = at(i + 1, j) || (j < b.length && at(i, j + 1));
    else if (j < b.length && b[j] === '#') result = at(i, j + 1) || (i < a.length && at(i + 1, j));
    else if (i === a.length || j === b.length) result = false;
    else result = (a[i] === '*' || b[j] === '*' || a[i] === b[j]) && at(i + 1, j + 1);
    memo.set(key, result);
    return result;
  };
  return at(0, 0);
}

/**
 * Warnings about a valid configuration. A route whose pattern can match the topics of several push sources lets a
 * sender of one source reach the destination meant for another: with the seed's default HTTP topic
 * `{{ eventType }}`, a low-trust bearer partner sending `type: charge.refunded` lands next to real Stripe events.
 * Each source's own prefix (`topic: "{{ source }}.{{ eventType }}"`) keeps them apart.
 */
export function configWarnings(
  config: QueueBoxConfig,
  options: { readonly publicInbox?: boolean } = {},
): ConfigWarning[] {
  return [
    ...routeWarnings(config),
    ...replayWarnings(config),
    ...weakSecretWarnings(config),
    ...openSourceWarnings(config, options.publicInbox ?? false),
    ...attemptWarnings(config),
    ...retryableStatusWarnings(config),
    ...retentionWarnings(config),
    ...kafkaSecurityWarnings(config),
  ];
}

/**
 * Kafka destinations and sources whose connection can be read or impersonated on the network: a password (SASL
 * PLAIN, or SCRAM, whose exchange an eavesdropper can attack offline) without TLS, and TLS whose broker certificates
 * are not checked (`rejectUnauthorized: false`: anyone on the path can pose as the broker and read every message and
 * the SASL password). Not refused: a private network or a test cluster may be meant (an outside security review:
 * `config check` said nothing of either).
 */
function kafkaSecurityWarnings(config: QueueBoxConfig): ConfigWarning[] {
  const warnings: ConfigWarning[] = [];
  const entries = [
    ...Object.entries(config.destinations).map(([name, d]) => [`destinations.${name}`, d] as const),
    ...Object.entries(config.sources).map(([name, s]) => [`sources.${name}`, s] as const),
  ];
  for (const [path, entry] of entries) {
    if (entry.type !== 'kafka') continue;
    const { ssl, sasl } = entry;
    const tls = ssl !== undefined && ssl !== false;
    if (sasl !== undefined && sasl.mechanism !== 'aws' && !tls) {
      warnings.push({
        path: `${path}.sasl`,
        message: `sends its ${sasl.mechanism} password without TLS: anyone on the network path can read it (PLAIN) or attack it offline (SCRAM); set ssl: true unless the listener is SASL_PLAINTEXT in a network you trust`,
      });
    }
    if (typeof ssl === 'object' && ssl.rejectUnauthorized === false) {
      warnings.push({
        path: `${path}.ssl.rejectUnauthorized`,
        message:
          "is false: the brokers' certificates are not checked, so anyone on the network path can pose as a broker and read the messages (and a SASL password); give the cluster's CA as ssl.ca instead",
      });
    }
  }
  return warnings;
}

/**
 * The longest a webhook provider goes on retrying a delivery, in hours: Stripe retries for up to 3 days. The inbox
 * deduplicates an idempotency key only while its row exists.
 */
export const PROVIDER_RETRY_HOURS = 72;

/**
 * `retention.keepSentHours` or `retention.keepDeadHours` above 0 (0 keeps rows) and under
 * {@link PROVIDER_RETRY_HOURS}, with an inbox source configured: retention deletes processed (or dead) inbox rows
 * that many hours after they were processed (or went dead), which ends their deduplication, so a provider's retry
 * that comes later is stored and delivered again. Not refused: a source whose sender never retries that long may
 * choose it.
 */
function retentionWarnings(config: QueueBoxConfig): ConfigWarning[] {
  if (Object.keys(config.sources).length === 0) return [];
  const kinds = [
    { key: 'keepSentHours', row: 'processed', happened: 'it was processed', keep: 'processed' },
    { key: 'keepDeadHours', row: 'dead', happened: 'it went dead', keep: 'dead' },
  ] as const;
  return kinds.flatMap(({ key, row, happened, keep }) => {
    const hours = config.retention[key];
    if (hours === 0 || hours >= PROVIDER_RETRY_HOURS) return [];
    const age = hours === 1 ? '1 hour has' : `${hours} hours have`;
    return [
      {
        path: `retention.${key}`,
        message: `is ${hours} hour${hours === 1 ? '' : 's'}, under ${PROVIDER_RETRY_HOURS}: retention deletes a ${row} inbox row once ${age} passed since ${happened}, and the inbox deduplicates an idempotency key only while its row exists, so a provider's retry of that key that comes later (Stripe retries for up to 3 days, ${PROVIDER_RETRY_HOURS} hours) is stored again as a new message and delivered again; set ${PROVIDER_RETRY_HOURS} or more, or 0 to keep ${keep} rows`,
      },
    ];
  });
}

/**
 * A destination `maxAttempts` above the max_attempts of the rows the relay writes (`inbox.relay.maxAttempts`, else
 * `outbox.maxAttempts`): a row's own max_attempts decides how often it is tried (the specification), and a
 * destination can only lower it (packages/outbox, delivery.ts), so the higher value is never used. Not refused:
 * rows an application enqueues carry their own max_attempts, which may be higher.
 */
function attemptWarnings(config: QueueBoxConfig): ConfigWarning[] {
  const relayMax = config.inbox.relay.maxAttempts;
  const key = relayMax === undefined ? 'outbox.maxAttempts' : 'inbox.relay.maxAttempts';
  const rowMax = relayMax ?? config.outbox.maxAttempts;
  const raise = relayMax === undefined ? `raise ${key} (or set inbox.relay.maxAttempts)` : `raise ${key}`;
  const warnings: ConfigWarning[] = [];
  for (const [name, destination] of Object.entries(config.destinations)) {
    const { maxAttempts } = destination;
    if (maxAttempts === undefined || maxAttempts <= rowMax) continue;
    warnings.push({
      path: `destinations.${name}.maxAttempts`,
      message: `${maxAttempts} is above ${key} ${rowMax}: a destination can only lower a row's max_attempts, never raise it, so the rows the relay writes still go dead after ${rowMax} attempts; ${raise} instead. Rows an application enqueues carry the maxAttempts of their enqueue() (default ${CONFIG_DEFAULTS.outbox.maxAttempts}), which it can only lower too`,
    });
  }
  return warnings;
}

/**
 * `retryableStatuses` of an HTTP destination, which no longer changes anything: every status but 2xx is retried
 * until the row's attempts run out, as the specification's state table requires (a row goes dead only when no
 * attempt remains, no route matches or a transform dead-letters it). Accepted, so a configuration that lists it still
 * starts.
 */
function retryableStatusWarnings(config: QueueBoxConfig): ConfigWarning[] {
  const warnings: ConfigWarning[] = [];
  for (const [name, destination] of Object.entries(config.destinations)) {
    if (destination.type !== 'http' || destination.retryableStatuses.length === 0) continue;
    warnings.push({
      path: `destinations.${name}.retryableStatuses`,
      message:
        'has no effect any more: every answer but a 2xx is retried until the row has no attempt left (a 4xx no longer goes dead at once); remove it, and lower maxAttempts if a destination should give up sooner',
    });
  }
  return warnings;
}

/**
 * The shortest bearer token or basic password a source should accept: the length `admin.token` must have. Shorter
 * ones are not refused (a partner may dictate its token), but anyone who guesses one writes into the inbox.
 */
export const SOURCE_SECRET_MIN_LENGTH = ADMIN_TOKEN_MIN_LENGTH;

/** Bearer tokens and basic passwords shorter than {@link SOURCE_SECRET_MIN_LENGTH}; the secret is never quoted. */
function weakSecretWarnings(config: QueueBoxConfig): ConfigWarning[] {
  const warnings: ConfigWarning[] = [];
  for (const [name, source] of Object.entries(config.sources)) {
    if (source.type !== 'http') continue;
    const { auth } = source;
    if (auth.scheme !== 'bearer' && auth.scheme !== 'basic') continue;
    auth.secrets.forEach((secret, i) => {
      const path = `sources.${name}.auth.secrets[${i}]`;
      if (auth.scheme === 'bearer' && secret.length < SOURCE_SECRET_MIN_LENGTH) {
        warnings.push({
          path,
          message: `is a bearer token of ${secret.length} character${secret.length === 1 ? '' : 's'}, under ${SOURCE_SECRET_MIN_LENGTH}: anyone who guesses it can write into the inbox; use a long random token (e.g. openssl rand -hex 32)`,
        });
      }
      if (auth.scheme === 'basic') {
        const password = secret.slice(secret.indexOf(':') + 1);
        if (password.length >= SOURCE_SECRET_MIN_LENGTH) return;
        warnings.push({
          path,
          message:
            password === ''
              ? 'has an empty password ("user:"): the user name alone lets anyone write into the inbox; add a long random password'
              : `has a password of ${password.length} character${password.length === 1 ? '' : 's'}, under ${SOURCE_SECRET_MIN_LENGTH}: anyone who guesses it can write into the inbox; use a long random password`,
        });
      }
    });
  }
  return warnings;
}

/** Whether `host` only accepts connections from this machine. */
function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  return (
    bare === 'localhost' || bare === '::1' || /^127(\.\d{1,3}){3}$/.test(bare) || bare === '::ffff:127.0.0.1'
  );
}

/** `scheme: none` on a server other machines can reach: anyone who reaches it writes into the inbox. */
function openSourceWarnings(config: QueueBoxConfig, publicInbox: boolean): ConfigWarning[] {
  if (!publicInbox && isLoopback(config.http.host)) return [];
  return Object.entries(config.sources)
    .filter(([, source]) => source.type === 'http' && source.auth.scheme === 'none')
    .map(([name]) => ({
      path: `sources.${name}.auth.scheme`,
      message: publicInbox
        ? 'is none, and on AWS its webhook URL is public (API Gateway): anyone who finds it writes into the inbox; choose an authentication scheme'
        : `is none while http.host is ${config.http.host}, which other machines can reach: anyone who can connect writes into the inbox; choose an authentication scheme, or keep http.host on 127.0.0.1`,
    }));
}

/**
 * Schemes whose signature (or static credential, or nothing) does not cover the header their default idempotency
 * key comes from: GitHub and Shopify sign the body only, and their delivery id and event headers travel beside it;
 * hmac, bearer, basic and none read the `Idempotency-Key` header.
 */
const UNSIGNED_DEFAULT_KEY: ReadonlySet<string> = new Set([
  'github',
  'shopify',
  'hmac',
  'bearer',
  'basic',
  'none',
]);

/** Of those, the schemes that sign nothing: a static credential, or none. */
const SIGNS_NOTHING: ReadonlySet<string> = new Set(['bearer', 'basic', 'none']);

/**
 * An HTTP source that leaves its key to such a scheme's default stores a captured request again as new whenever
 * its delivery id header is changed (and, with a changed event header, on a topic the sender picks). Naming the
 * key (`{ bodyHash: true }`, a `path` into the signed body, or the header itself) silences it: that is a choice.
 */
function replayWarnings(config: QueueBoxConfig): ConfigWarning[] {
  const warnings: ConfigWarning[] = [];
  for (const [name, source] of Object.entries(config.sources)) {
    if (source.type !== 'http' || source.idempotencyKey !== undefined) continue;
    if (!UNSIGNED_DEFAULT_KEY.has(source.auth.scheme)) continue;
    warnings.push({
      path: `sources.${name}.idempotencyKey`,
      message: `is not set, so the key is the ${source.auth.scheme} scheme's default: ${SIGNS_NOTHING.has(source.auth.scheme) ? 'a header nothing signs' : 'a header its signature does not cover'}, and a captured request re-sent with a new one is stored again as a new message; set idempotencyKey: { bodyHash: true } (a byte-identical body is a duplicate) or a path into the signed body, or name the header to keep this (packages/inbox/README.md, "Which schemes a replay gets through")`,
    });
  }
  return warnings;
}

/**
 * Whether every topic `inner` matches, `outer` matches too (`*` one segment, `#` any number, literals exactly).
 * Conservative: true only when `outer` can take each segment of `inner` as it stands (a `*` of `inner` by a `*` or
 * `#`, a `#` of `inner` by a `#` only), so a false answer may still be a cover (`a.*.#` covers `a.#.b`), never
 * the other way round.
 */
export function patternCovers(outer: readonly string[], inner: readonly string[]): boolean {
  const memo = new Map<number, boolean>();
  const at = (i: number, j: number): boolean => {
    const key = i * (inner.length + 1) + j;
    const known = memo.get(key);
    if (known !== undefined) return known;
    let result: boolean;
    if (i === outer.length) result = j === inner.length;
    else if (outer[i] === '#') result = at(i + 1, j) || (j < inner.length && at(i, j + 1));
    else if (j === inner.length || inner[j] === '#') result = false;
    else if (outer[i] === '*') result = at(i + 1, j + 1);
    else result = inner[j] !== '*' && outer[i] === inner[j] && at(i + 1, j + 1);
    memo.set(key, result);
    return result;
  };
  return at(0, 0);
}

/**
 * Route problems that leave messages undelivered without any error:
 * - a push source whose topics no route can match: every webhook it accepts goes dead ("no route matches"). Only
 *   when no route overlaps the topic's shape (the event type standing for any segments), so a warning is certain;
 * - a route an earlier one covers: the first matching route wins, so it is never chosen;
 * - a `>` segment (NATS's "the rest"), which is a literal here.
 */
function routeWarnings(config: QueueBoxConfig): ConfigWarning[] {
  const shapes = Object.entries(config.sources)
    .filter(([, source]) => source.mode === 'push')
    .map(([name, source]) => ({ name, shape: topicShape(source.topic, name) }));
  const warnings: ConfigWarning[] = [];
  const patterns = config.routes.map((route) => topicSegments(route.match));
  if (patterns.length > 0) {
    const lower = (segments: readonly string[]) => segments.map((segment) => segment.toLowerCase());
    for (const { name, shape } of shapes) {
      if (patterns.some((pattern) => patternsOverlap(pattern, shape))) continue;
      const byCase = config.routes.filter((route) =>
        patternsOverlap(lower(topicSegments(route.match)), lower(shape)),
      );
      const topic = config.sources[name]?.topic ?? '';
      const hint =
        byCase.length > 0
          ? `; route matching is case-sensitive, and ${byCase.map((r) => `"${r.match}"`).join(', ')} would match it but for letter case`
          : '';
      warnings.push({
        path: `sources.${name}.topic`,
        message: `"${topic}" gives topics that no route matches (routes: ${config.routes.map((r) => `"${r.match}"`).join(', ')}), so every message this source accepts goes dead with "no route matches"${hint}; add a route for them or change the topic`,
      });
    }
  }
  config.routes.forEach((route, i) => {
    const pattern = patterns[i] ?? [];
    if (pattern.includes('>')) {
      warnings.push({
        path: `routes[${i}].match`,
        message: `"${route.match}" has a ">" segment, which matches only the literal topic segment ">" here (it is NATS syntax); use "#" for any number of segments`,
      });
    }
    const earlier = patterns.findIndex((other, j) => j < i && patternCovers(other, pattern));
    if (earlier >= 0) {
      warnings.push({
        path: `routes[${i}].match`,
        message: `"${route.match}" is never chosen: every topic it matches is matched by routes[${earlier}] ("${config.routes[earlier]?.match}") before it, and the first matching route wins; move it above, or remove it`,
      });
    }
  });
  config.routes.forEach((route, i) => {
    const pattern = topicSegments(route.match);
    const reached = shapes.filter((s) => patternsOverlap(pattern, s.shape)).map((s) => s.name);
    if (reached.length < 2) return;
    warnings.push({
      path: `routes[${i}].match`,
      message: `"${route.match}" can match topics of the sources ${reached.join(', ')}, so a sender of one can reach destination "${route.destination}" with topics meant for another; give each source its own prefix, e.g. topic: "{{ source }}.{{ eventType }}"`,
    });
  });
  return warnings;
}
