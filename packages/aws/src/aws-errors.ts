/**
 * AWS SDK errors as text and as retry decisions. A service error of the SDK (v3) carries its code as `name`, a
 * `$fault` (`client` or `server`) and the HTTP status in `$metadata`; a transport error (refused connection,
 * timeout) carries a Node `code`.
 */

interface SdkErrorShape {
  readonly name?: unknown;
  readonly message?: unknown;
  readonly code?: unknown;
  readonly Code?: unknown;
  readonly $fault?: unknown;
  readonly $metadata?: { readonly httpStatusCode?: unknown };
  readonly cause?: unknown;
}

/**
 * The prefixes a service puts before an error code: SQS's JSON protocol answers `__type:
 * com.amazonaws.sqs#BatchRequestTooLong` (ElasticMQ's `Code`) and `x-amzn-query-error:
 * AWS.SimpleQueueService.BatchRequestTooLong;Sender` (AWS's; the SDK keeps it as `Code`).
 */
const CODE_PREFIX = /^(?:[A-Za-z0-9.]+#|AWS\.SimpleQueueService\.)/;

/**
 * The service's error code (`InvalidMessageContents`, `ThrottlingException`, `BatchRequestTooLong` for SQS's
 * `AWS.SimpleQueueService.BatchRequestTooLong`, …) or a transport code, if any.
 */
export function awsErrorCode(error: unknown): string | undefined {
  return awsErrorCodes(error)[0];
}

/** Every code an SDK error carries, prefixes removed: its `Code` (the query-compatible one), `name`, Node `code`. */
function awsErrorCodes(error: unknown): string[] {
  if (typeof error !== 'object' || error === null) return [];
  const e = error as SdkErrorShape;
  const codes: string[] = [];
  for (const candidate of [e.Code, e.name, e.code]) {
    if (typeof candidate !== 'string') continue;
    const code = candidate.replace(CODE_PREFIX, '');
    if (code !== '' && code !== 'Error' && !codes.includes(code)) codes.push(code);
  }
  return codes;
}

/** An SDK error as one line: code, message, HTTP status and the cause behind it. */
export function describeAwsError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const e = error as SdkErrorShape;
  const code = awsErrorCode(error);
  const status = e.$metadata?.httpStatusCode;
  let text =
    code && !error.message.startsWith(code) ? `${code}: ${error.message}` : error.message || code || 'error';
  if (typeof status === 'number') text += ` (HTTP ${status})`;
  if (e.cause instanceof Error && e.cause.message && !text.includes(e.cause.message)) {
    text += `: ${e.cause.message}`;
  }
  return text;
}

/**
 * Whether a failed request can never succeed as it is: the service refused it with one of `permanentCodes` (its
 * content: too long, invalid characters, invalid parameters). Everything else — transport errors, throttling,
 * server faults, missing permissions or a missing queue / topic / bus (both can be fixed while the row waits) — is
 * worth a retry.
 */
export function isPermanentAwsError(error: unknown, permanentCodes: ReadonlySet<string>): boolean {
  // Code and name may differ (SQS: `NonExistentQueue` / `QueueDoesNotExist`): either one names the refusal.
  return awsErrorCodes(error).some((code) => permanentCodes.has(code));
}
