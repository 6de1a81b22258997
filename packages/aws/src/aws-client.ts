/** Where an AWS client connects and how long it waits: what every QueueBox AWS adapter accepts. */
export interface AwsClientOptions {
  /**
   * The region. Default: the region in the queue URL or ARN, else the SDK's own chain (`AWS_REGION`, the
   * profile), else `us-east-1` when an `endpoint` is set (local servers ignore it).
   */
  readonly region?: string;
  /**
   * Another endpoint than AWS's, e.g. `http://127.0.0.1:9324` for ElasticMQ. Credentials come from the usual AWS
   * chain (environment, profile, container or instance role) in any case.
   */
  readonly endpoint?: string;
  /** Time to open a connection. Default 3000 ms. */
  readonly connectionTimeoutMs?: number;
  /**
   * Time a request may take, from sending it to the end of the answer; then it fails as a `TimeoutError` and counts
   * as a retryable failure (the SDK's next attempt, then the outbox's backoff). Default 10000 ms.
   */
  readonly requestTimeoutMs?: number;
  /**
   * Attempts the SDK makes inside one publish (throttling, server faults); after them the outbox's own backoff
   * takes over. Default 2.
   */
  readonly sdkMaxAttempts?: number;
}

/** The region of a queue URL (`https://sqs.eu-west-1.amazonaws.com/…`, `https://eu-west-1.queue.amazonaws.com/…`). */
export function regionOfQueueUrl(queueUrl: string): string | undefined {
  let host: string;
  try {
    host = new URL(queueUrl).hostname;
  } catch {
    return undefined;
  }
  return (
    /^sqs[.-]([a-z0-9-]+)\.amazonaws\.com(\.cn)?$/.exec(host)?.[1] ??
    /^([a-z0-9-]+)\.queue\.amazonaws\.com(\.cn)?$/.exec(host)?.[1]
  );
}

/** The region field of an ARN (`arn:aws:sns:eu-west-1:123456789012:topic` → `eu-west-1`). */
export function regionOfArn(arn: string): string | undefined {
  const parts = arn.split(':');
  return parts[0] === 'arn' && parts.length >= 6 && parts[3] ? parts[3] : undefined;
}

/**
 * The account and region of a queue URL as the queue's ARN (`https://sqs.eu-west-1.amazonaws.com/123456789012/q`
 * → `arn:aws:sqs:eu-west-1:123456789012:q`; `arn:aws-cn:…` in China, `arn:aws-us-gov:…` in GovCloud); undefined for a URL that is not AWS's (a local server) or whose path
 * is not an account and a queue name SQS allows.
 */
export function queueArnOfUrl(queueUrl: string): string | undefined {
  const region = regionOfQueueUrl(queueUrl);
  if (region === undefined) return undefined;
  // SQS allows names of up to 80 letters, digits, hyphens and underscores; a FIFO queue's `.fifo` suffix counts
  // toward the 80, leaving 75 before it.
  const match = /^\/(\d{12})\/([A-Za-z0-9_-]{1,75}\.fifo|[A-Za-z0-9_-]{1,80})\/?$/.exec(
    new URL(queueUrl).pathname,
  );
  if (!match) return undefined;
  // The partition by region: China and GovCloud are partitions of their own (their ARNs say so).
  const partition = region.startsWith('cn-') ? 'aws-cn' : region.startsWith('us-gov-') ? 'aws-us-gov' : 'aws';
  return `arn:${partition}:sqs:${region}:${match[1]}:${match[2]}`;
}

/** An AWS SDK client package and one client of it, made on first use (see {@link lazySdkClient}). */
export interface LazySdkClient<Sdk, Client> {
  /** The package and the client: loaded and made by the first call, then the same for every request. */
  get(): Promise<{ readonly sdk: Sdk; readonly client: Client }>;
  /** Destroys the client made here (never the caller's own) and forgets it; a later `get` makes a new one. */
  close(): Promise<void>;
}

/**
 * An AWS SDK client package loaded on first use (a function that never sends to the service never loads it) and one
 * client made from it, or the caller's own `given` client: both are made once and shared by every request, so a
 * batch costs no `import()` of its own. A failed load is kept until `close`: the package is missing from the bundle.
 */
export function lazySdkClient<Sdk, Client extends { destroy(): void }>(
  load: () => Promise<Sdk>,
  make: (sdk: Sdk) => Client,
  given?: Client,
): LazySdkClient<Sdk, Client> {
  let ready: Promise<{ readonly sdk: Sdk; readonly client: Client }> | undefined;
  return {
    get() {
      ready ??= load().then((sdk) => ({ sdk, client: given ?? make(sdk) }));
      return ready;
    },
    async close() {
      const open = ready;
      ready = undefined;
      if (open && given === undefined) (await open.catch(() => undefined))?.client.destroy();
    },
  };
}

/** The settings shared by the SDK clients QueueBox creates (the client classes take the same shape). */
export function sdkClientConfig(options: AwsClientOptions, regionFromTarget: string | undefined) {
  const region =
    options.region ??
    regionFromTarget ??
    (options.endpoint ? process.env.AWS_REGION || 'us-east-1' : undefined);
  return {
    ...(region === undefined ? {} : { region }),
    ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
    maxAttempts: options.sdkMaxAttempts ?? 2,
    requestHandler: {
      connectionTimeout: options.connectionTimeoutMs ?? 3000,
      requestTimeout: options.requestTimeoutMs ?? 10_000,
      // Without it @smithy/node-http-handler (4.x) only logs a WARN when requestTimeout passes and keeps waiting: a
      // request AWS never answers would hold its publisher's slot for good.
      throwOnRequestTimeout: true,
    },
  };
}
