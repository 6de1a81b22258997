import type { Headers } from '@queuebox/core';
import { storableHeaderText } from '@queuebox/core';
import type { SourceOptions } from './options.ts';

/** Request headers as HTTP servers and API Gateway hand them over. */
export type RawHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * Lower-cases header names and joins repeated values with `, ` (RFC 9110 field combination). Names that differ only
 * in letter case are combined the same way.
 */
export function normalizeHeaders(raw: RawHeaders): Record<string, string> {
  const headers: Record<string, string> = Object.create(null);
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    const text = typeof value === 'string' ? value : value.join(', ');
    const key = name.toLowerCase();
    const previous = headers[key];
    headers[key] = previous === undefined ? text : `${previous}, ${text}`;
  }
  return headers;
}

/**
 * Headers never stored, so never relayed to a destination: hop-by-hop headers (RFC 9110 §7.6.1 and the usual proxy
 * ones), headers that describe the transfer rather than the message (QueueBox parsed the body as JSON, and a
 * delivery carries its own `Content-Type`), headers bound to the received request's bytes or conditions (digests,
 * ranges, preconditions: a delivery's body is QueueBox's own serialisation, so a relayed `Content-Digest` would no
 * longer match it and an `If-Match` would make the destination answer 412), what proxies and browsers add about the
 * client, and credentials. Names that match UNSTORED_PREFIXES or CREDENTIAL_NAME are never stored either. `Date` and
 * `User-Agent` are stored: they say when and by what the webhook was sent.
 */
export const UNSTORED_HEADERS: ReadonlySet<string> = new Set([
  // hop-by-hop
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  // the transfer, not the message
  'content-length',
  'content-type',
  'content-encoding',
  'accept-encoding',
  'host',
  'expect',
  // bound to the received request: digests of its body, its range, its preconditions (RFC 9530, RFC 3230, RFC 1864,
  // RFC 9110 §13 and §14), and Max-Forwards, a hop count of TRACE and OPTIONS (RFC 9110 §7.6.2)
  'content-digest',
  'repr-digest',
  'digest',
  'content-md5',
  'want-digest',
  'want-content-digest',
  'want-repr-digest',
  'content-range',
  'range',
  'if-match',
  'if-none-match',
  'if-modified-since',
  'if-unmodified-since',
  'if-range',
  'max-forwards',
  // the client as proxies and browsers describe it
  'forwarded',
  'via',
  'x-real-ip',
  'x-client-ip',
  'x-cluster-client-ip',
  'true-client-ip',
  'cf-connecting-ip',
  'cf-connecting-ipv6',
  'fastly-client-ip',
  'fly-client-ip',
  'x-azure-clientip',
  'x-azure-socketip',
  'x-envoy-external-address',
  'x-appengine-user-ip',
  'origin',
  'referer',
  // httpoxy: CGI-style receivers turn `Proxy` into HTTP_PROXY
  'proxy',
  // method and URL overrides that some frameworks and proxies obey: a sender must not steer the destination
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
  'x-original-url',
  'x-original-uri',
  'x-rewrite-url',
  // credentials and signatures of every scheme (most also match CREDENTIAL_NAME)
  'authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
  'stripe-signature',
  'x-hub-signature',
  'x-hub-signature-256',
  'webhook-signature',
  'svix-signature',
  'x-shopify-hmac-sha256',
  'shopify-hmac-sha256',
  'x-slack-signature',
]);

/**
 * Prefixes of header names never stored: forwarding headers (`X-Forwarded-For`, …), browsers' `Sec-*`, every
 * `Proxy-*` (hop-by-hop or about the proxy, never the message), and what proxies and identity-aware front doors add
 * about the client and its user: AWS load balancers' identity tokens (`X-Amzn-Oidc-Accesstoken`, `-Data`,
 * `-Identity`), Cloudflare Access, Google IAP, Azure App Service authentication, client certificates, CloudFront's
 * and Vercel's viewer headers.
 */
export const UNSTORED_PREFIXES: readonly string[] = [
  'x-forwarded-',
  'x-original-forwarded-',
  'sec-',
  'proxy-',
  'x-amzn-oidc-',
  'cf-access-',
  'x-goog-authenticated-',
  'x-goog-iap-',
  'x-ms-client-principal',
  'x-ms-token-',
  'x-ssl-client-',
  'ssl-client-',
  'x-client-cert',
  'x-client-verify',
  'cloudfront-viewer-',
  'x-vercel-',
];

/**
 * Header names that carry a credential or a signature, whatever the scheme: a word such as `auth`, `token`,
 * `secret`, `signature`, `hmac`, `jwt`, `cookie` or `session` between dashes, underscores or dots (`X-Auth-Token`,
 * `X-Sig`, `X-Hub-Signature-256`, `X-Shopify-Hmac-Sha256`, `X-Goog-Iap-Jwt-Assertion`, `x_api_key`); a key named
 * for what it opens (`X-Functions-Key`, `Ocp-Apim-Subscription-Key`, `Aeg-Sas-Key`, `X-Access-Key`, `Private-Key`,
 * `api_key`), and the run-together forms (`X-AuthToken`, `X-AccessToken`, `X-Signature256`, `X-HmacSha256`). A key
 * named for what it identifies stays (`Idempotency-Key`, `X-Event-Key`, `X-Partition-Key`).
 */
export const CREDENTIAL_NAME =
  /(?:^|[-_.])(?:auth|authorization|token|secret|password|passwd|pwd|credentials?|signature\d*|sig|hmac(?:sha\d+)?|jwt|cookie|session|csrf|xsrf|(?:api|access|secret|private|client|subscription|functions?|sas|webhook|app|consumer|master|signing|shared|account|license|service|encryption)[-_]?key|(?:auth|access|api|refresh|id|bearer|session|security|oauth)[-_]?token)(?:[-_.]|$)/;

/**
 * Answers of isUnstoredHeader by name: a webhook sender sends the same dozen names on every request, and each
 * answer took a set lookup, three prefix tests and a regular expression. Bounded, so a sender inventing names
 * cannot grow it: past UNSTORED_MEMO_SIZE names, new ones are answered without being kept.
 */
const unstoredMemo = new Map<string, boolean>();
const UNSTORED_MEMO_SIZE = 1024;

/** Whether a lower-cased header name is never stored (see UNSTORED_HEADERS). */
export function isUnstoredHeader(name: string): boolean {
  const known = unstoredMemo.get(name);
  if (known !== undefined) return known;
  const unstored =
    UNSTORED_HEADERS.has(name) ||
    UNSTORED_PREFIXES.some((prefix) => name.startsWith(prefix)) ||
    CREDENTIAL_NAME.test(name);
  if (unstoredMemo.size < UNSTORED_MEMO_SIZE) unstoredMemo.set(name, unstored);
  return unstored;
}

/**
 * The headers to store with a message: every received header except the unstored ones (isUnstoredHeader), the
 * headers that the `Connection` header names, and `credentialHeaders` (the source scheme's signature headers);
 * with `keep` (a source's `keepHeaders`, lower-cased), only the names it lists. Names stay lower-cased. A name or
 * value that no store keeps (U+0000, an unpaired surrogate: an API Gateway event or a library caller can hand such
 * text over, Node's HTTP parser cannot) is stored as `base64:` + the base64 of its UTF-8 bytes (core's
 * `storableHeaderText`, as the broker sources store theirs): as it was, the insert failed and the sender got a 500
 * on every retry, for a header QueueBox only carries along.
 */
export function storableHeaders(
  headers: Readonly<Record<string, string>>,
  credentialHeaders: readonly string[],
  keep?: ReadonlySet<string>,
): Headers {
  const credentials = lowerCasedOnce(credentialHeaders);
  // Most requests name no header in `Connection` (HTTP/1.1 keeps alive without it): then nothing is split.
  const connection = headers.connection;
  const named =
    connection === undefined ? undefined : connection.split(',').map((n) => n.trim().toLowerCase());
  const kept: Headers = {};
  for (const [name, value] of Object.entries(headers)) {
    // `__proto__` would set the prototype of a plain object instead of a key; no real header has that name.
    if (name === '__proto__' || credentials.has(name) || isUnstoredHeader(name)) continue;
    if (named?.includes(name) || (keep !== undefined && !keep.has(name))) continue;
    kept[storableHeaderText(name)] = storableHeaderText(value);
  }
  return kept;
}

/** The lower-cased names of each `credentialHeaders` list (one per route, made once), by the list. */
const loweredLists = new WeakMap<readonly string[], ReadonlySet<string>>();

function lowerCasedOnce(names: readonly string[]): ReadonlySet<string> {
  let lowered = loweredLists.get(names);
  if (lowered === undefined) {
    lowered = new Set(names.map((h) => h.toLowerCase()));
    loweredLists.set(names, lowered);
  }
  return lowered;
}

/** A source's `keepHeaders` as a set of lower-cased names, or undefined when it keeps every storable header. */
export function keptHeaders(source: SourceOptions): ReadonlySet<string> | undefined {
  return source.keepHeaders === undefined
    ? undefined
    : new Set(source.keepHeaders.map((name) => name.toLowerCase()));
}
