/**
 * What every AWS SDK client of QueueBox's functions is built with (Secrets Manager here; Lambda and EventBridge
 * Scheduler in functions/lambda-shell): the SDK's defaults have no connection or request timeout, so one hung call would
 * hold a webhook's answer (or a tick) until the function itself timed out. Two attempts: the SDK retries a
 * throttled or failed call once, then the caller decides (a wake-up is logged and dropped; the scheduled tick
 * still finds the rows).
 */
export const AWS_CLIENT_DEFAULTS = {
  maxAttempts: 2,
  requestHandler: {
    /** TCP + TLS set-up of one attempt. */
    connectionTimeout: 1000,
    /** Request and response of one attempt; `throwOnRequestTimeout` makes its breach an error, not a warning. */
    requestTimeout: 3000,
    throwOnRequestTimeout: true,
    /** Older SDKs (the Lambda runtime's may be one) read a stalled socket as the request timeout. */
    socketTimeout: 3000,
  },
} as const;

/** The longest a call with {@link AWS_CLIENT_DEFAULTS} can take: every attempt times out (backoff aside). */
export const AWS_CLIENT_WORST_CASE_MS =
  AWS_CLIENT_DEFAULTS.maxAttempts *
  (AWS_CLIENT_DEFAULTS.requestHandler.connectionTimeout + AWS_CLIENT_DEFAULTS.requestHandler.requestTimeout);
