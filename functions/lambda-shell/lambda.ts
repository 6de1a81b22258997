import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import middy, { type MiddlewareObj } from '@middy/core';
import { loadConfig, type QueueBoxConfig } from '@queuebox/config';
import {
  type Clock,
  createLogThrottle,
  errorFields,
  HttpError,
  type Logger as LoggerPort,
  loggerOver,
  StoreUnavailableError,
  systemClock,
} from '@queuebox/core';
import {
  type TickEvent as ContractTickEvent,
  FUNCTION_ENV,
  METRIC_NAMESPACE,
  WAKE_UP_EVENT,
} from '@queuebox/deploy-contract';
import {
  createServiceCache,
  DEFAULT_SAFETY_MARGIN_MS,
  drainDeadline,
  type ServiceCache,
  type ServiceCacheOptions,
  type ServicesOptions,
} from '@queuebox/use-cases';
import {
  type BookingOutcome,
  createDeferredTick,
  createLambdaInvoker,
  createSchedulerClient,
  createWakeUp,
  type FunctionInvoker,
  type ScheduleCreator,
  type WakeUp,
} from '@queuebox/wake-ups';
import type { Context, ScheduledEvent } from 'aws-lambda';

// What every function shares: Powertools Logger and Metrics, the per-container service cache, wake-ups, budgets.
// The names shared with infra/ (environment variables, metric names, events) come from @queuebox/deploy-contract.

export { Logger, Metrics, MetricUnit };

/** What a tick receives: infra's `{ trigger }` (schedules, wake-ups, deferred ticks) or an EventBridge Scheduled Event. */
export type TickEvent = Partial<ContractTickEvent> | ScheduledEvent | null | undefined;

/** How long a container uses its configuration (and the secrets in it) before reading it again: 5 minutes. */
export const CONFIG_MAX_AGE_MS = 300_000;

/** Options of {@link createShell}; tests inject what they observe, the deployment takes the defaults. */
export interface ShellOptions {
  /** Default: a Powertools Logger configured by `POWERTOOLS_*` variables. */
  readonly logger?: Logger;
  /** Default: Powertools Metrics, namespace `POWERTOOLS_METRICS_NAMESPACE` or `QueueBox`. */
  readonly metrics?: Metrics;
  /**
   * Builds the per-container cache from the shell's options (the function's services, a log line on replacement).
   * Default `createServiceCache` (loadConfig via `QUEUEBOX_CONFIG`, openStore of `database.provider`); tests wrap it
   * to read their configuration file and to close the cache afterwards.
   */
  readonly createCache?: (options: ServiceCacheOptions) => ServiceCache;
  /** Default: `createLambdaInvoker()` (`@aws-sdk/client-lambda`, loaded on first use). */
  readonly invoker?: FunctionInvoker;
  /** Books deferred ticks. Default: `createSchedulerClient()` (`@aws-sdk/client-scheduler`, loaded on first use). */
  readonly scheduler?: ScheduleCreator;
  /** Where wake-up targets and the deferred-tick schedule group and role are read. Default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Default the system clock (deadlines, wake-up debounce). */
  readonly clock?: Clock;
  /** Time a tick keeps between its drain's deadline and the end of the invocation. Default 3000 ms. */
  readonly safetyMarginMs?: number;
  /** Least time between two wake-ups of the same function from one container. Default 1000 ms. */
  readonly wakeUpIntervalMs?: number;
}

/** The wiring one function file works with. */
export interface Shell {
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly cache: ServiceCache;
  readonly clock: Clock;
  /** The deadline of a drain in this invocation: remaining time minus the safety margin. */
  deadline(context: Pick<Context, 'getRemainingTimeInMillis'>): number;
  /**
   * The debounced wake-up of the function named by the environment variable `variable`; its `request()` answers
   * false without invoking anything when the variable is unset (a deployment without that function).
   */
  wakeUp(variable: string): WakeUp;
  /** The shell's logger as core's logger port, which the packages (the outbox poller among them) write to. */
  readonly outboxLogger: LoggerPort;
  /**
   * After a drain: books one EventBridge Scheduler invocation of this function (`context.invokedFunctionArn`) at
   * `due` rounded up to the minute, unless the periodic tick of `rateMinutes` fires then anyway (see
   * @queuebox/wake-ups deferred-tick.ts). Logs a failure and answers it; never throws.
   */
  bookDeferredTick(
    due: Date | null,
    context: Pick<Context, 'invokedFunctionArn' | 'functionName'>,
    rateMinutes?: number,
  ): Promise<BookingOutcome>;
}

/** What the function file itself decides (not a test). */
export interface FunctionSetup {
  /** Options of `createServices`, e.g. the publisher factories of outbox-tick. The poller logs to the shell's logger. */
  readonly services?: ServicesOptions;
  /**
   * Runs after each load of the configuration (the first and every reload), before the services are built over it:
   * e.g. outbox-tick imports the publisher packages of its destinations' types. Its failure fails the load. Default
   * none. Only the shell's own loader runs it (a `createCache` that loads the configuration itself skips it).
   */
  readonly prepare?: (config: QueueBoxConfig) => Promise<void>;
}

/** Creates the wiring of one function: its logger, metrics, cache and wake-ups (once per container). */
export function createShell(options: ShellOptions = {}, setup: FunctionSetup = {}): Shell {
  const env = options.env ?? process.env;
  const logger = options.logger ?? new Logger();
  const metrics =
    options.metrics ?? new Metrics({ namespace: env[FUNCTION_ENV.metricsNamespace] || METRIC_NAMESPACE });
  const clock = options.clock ?? systemClock;
  const invoker = options.invoker ?? createLambdaInvoker();
  const wakeUps = new Map<string, WakeUp>();
  const deferredTick = createDeferredTick({
    scheduler: options.scheduler ?? createSchedulerClient(),
    group: env[FUNCTION_ENV.wakeScheduleGroup],
    roleArn: env[FUNCTION_ENV.wakeSchedulerRoleArn],
    clock,
  });
  const margin = options.safetyMarginMs ?? DEFAULT_SAFETY_MARGIN_MS;
  const outboxLogger = loggerOver(logger);
  const replacements = createLogThrottle();
  const prepare = setup.prepare;
  const cache = (options.createCache ?? createServiceCache)({
    services: { logger: outboxLogger, ...setup.services },
    // The cache's default loader, then the function's preparation.
    ...(prepare === undefined
      ? {}
      : {
          loadConfig: async (read?: { readonly freshSecrets?: boolean }) => {
            const config = await loadConfig(read?.freshSecrets ? { freshSecrets: true } : {});
            await prepare(config);
            return config;
          },
        }),
    // Once a minute at most (then a count): while the database is down every invocation replaces them.
    onReplace: (cause) =>
      replacements.line('replace', (extra) =>
        logger.warn('replacing the store and services', { error: errorFields(cause), ...extra }),
      ),
    // Secrets are read again (past their cache) after this long, so a rotated one is used without waiting for a cold
    // start, and at once when the database refuses the credentials (`ServiceCache.fail`).
    configMaxAgeMs: CONFIG_MAX_AGE_MS,
    now: () => clock.now(),
    onReload: () => logger.info('the configuration changed; rebuilding the store and services'),
    // The container keeps its configuration; a new one would fail to start with what was read (an alarm on
    // function errors hears that one).
    onReloadFailed: (error) =>
      logger.warn('reading the configuration again failed; keeping the one in use', {
        error: errorFields(error),
      }),
  });

  return {
    logger,
    metrics,
    cache,
    clock,
    outboxLogger,
    deadline: (context) => drainDeadline(context.getRemainingTimeInMillis(), clock.now(), margin),
    async bookDeferredTick(due, context, rateMinutes) {
      const outcome = await deferredTick.book({
        due,
        functionArn: context.invokedFunctionArn,
        functionName: context.functionName,
        ...(rateMinutes === undefined ? {} : { rateMinutes }),
      });
      if (!outcome.booked && outcome.reason === 'failed') {
        // A lost booking costs latency only: the periodic tick finds the rows.
        logger.warn('booking a deferred tick failed', { at: outcome.at, error: errorFields(outcome.error) });
      }
      return outcome;
    },
    wakeUp(variable) {
      let wakeUp = wakeUps.get(variable);
      if (wakeUp === undefined) {
        const target = env[variable];
        wakeUp = target
          ? createWakeUp({
              send: () => invoker.invokeAsync(target, WAKE_UP_EVENT),
              clock,
              ...(options.wakeUpIntervalMs === undefined ? {} : { minIntervalMs: options.wakeUpIntervalMs }),
              // A lost wake-up costs latency only; the scheduled tick finds the rows.
              onError: (error) => logger.warn('wake-up failed', { target, error: errorFields(error) }),
            })
          : { request: async () => false };
        wakeUps.set(variable, wakeUp);
      }
      return wakeUp;
    },
  };
}

/** Time an HTTP function keeps between its answer's deadline ({@link beforeTimeout}) and its own timeout. */
export const ANSWER_MARGIN_MS = 1000;

/**
 * Time a broker source function (sqs-source, nats-source-tick) keeps after its last store try, at most half the
 * invocation: to hand the messages back (a longer SQS visibility, NATS `nak`s), publish and answer. A database that
 * went silent holds a statement up to `database.queryTimeoutMs` (or the Data API's 45 s), which may be longer than the
 * function's timeout; a function that times out answers nothing (SQS: the whole batch comes back after the queue's
 * visibility timeout without an outage's longer one; both: the full timeout billed, an Error counted).
 */
export const STORE_TRY_MARGIN_MS = 5000;

/** A store try of a broker source function, given up {@link STORE_TRY_MARGIN_MS} before the timeout as an outage. */
export function storeTryBeforeTimeout<T>(
  work: Promise<T>,
  context: Pick<Context, 'getRemainingTimeInMillis'>,
): Promise<T> {
  const marginMs = Math.min(STORE_TRY_MARGIN_MS, Math.floor(context.getRemainingTimeInMillis() / 2));
  return beforeTimeout(work, context, marginMs);
}

/**
 * The invocation ran out of time while no store call was pending (slow work before the store, a transform): 503
 * `timeout`, so the sender retries (nothing was stored), and not a database outage, so the store is kept.
 */
export class InvocationTimeoutError extends HttpError {
  constructor(budgetMs: number, marginMs: number) {
    super(
      503,
      'timeout',
      `The request ran out of time in this invocation (${budgetMs} ms, ${marginMs} ms before the function's timeout); retry later`,
    );
  }
}

/**
 * Resolves as `work` does, or rejects once the invocation has only `marginMs` left: with `StoreUnavailableError`
 * when `storePending()` (default: always) says a store call is what has not answered, else with
 * {@link InvocationTimeoutError}. A database that went silent (connections open, no answer) holds a statement up to
 * `database.queryTimeoutMs`, or the Data API's 45 s; inbox-http's function times out at 29 s (API Gateway's limit is
 * 30 s), and a function that times out gives the sender API Gateway's `500 Internal server error` instead of
 * QueueBox's 503, which a sender retries. A later failure of `work` is ignored: the request was answered.
 */
export function beforeTimeout<T>(
  work: Promise<T>,
  context: Pick<Context, 'getRemainingTimeInMillis'>,
  marginMs: number = ANSWER_MARGIN_MS,
  storePending: () => boolean = () => true,
): Promise<T> {
  const budgetMs = Math.max(0, context.getRemainingTimeInMillis() - marginMs);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          storePending()
            ? new StoreUnavailableError(
                `The database did not answer within this invocation (${budgetMs} ms, ${marginMs} ms before the function's timeout)`,
              )
            : new InvocationTimeoutError(budgetMs, marginMs),
        ),
      budgetMs,
    );
  });
  work.catch(() => undefined);
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** Options of {@link lambda}. */
export interface LambdaOptions {
  /** Flush EMF metrics after each invocation. Default true. */
  readonly metrics?: boolean;
}

/**
 * Flushes the invocation's stored metrics after it returns or throws, as Powertools' `logMetrics` middleware does,
 * but only when there are some: `publishStoredMetrics()` on an empty store prints the plain-text warning "No
 * application metrics to publish…" (not JSON), which every idle tick would write once a minute or more. With
 * nothing stored only the request's dimensions and metadata are dropped, as the flush would.
 */
export function flushStoredMetrics(metrics: Metrics): MiddlewareObj {
  const flush = () => {
    if (metrics.hasStoredMetrics()) {
      metrics.publishStoredMetrics();
    } else {
      metrics.clearDimensions();
      metrics.clearMetadata();
    }
  };
  return { after: flush, onError: flush };
}

/**
 * The middy handler of one function: Powertools' Lambda context in every log line, EMF metrics flushed after each
 * invocation that stored some, and any error that says the database is unavailable marks the store for replacement
 * on the next invocation (the error is still thrown: Lambda records the failure).
 */
export function lambda<E, R>(
  shell: Shell,
  handler: (event: E, context: Context) => Promise<R>,
  options: LambdaOptions = {},
) {
  const wrapped = middy<E, R>(handler).use(injectLambdaContext(shell.logger));
  if (options.metrics ?? true) wrapped.use(flushStoredMetrics(shell.metrics));
  return wrapped.use({
    onError: (request) => {
      if (shell.cache.fail(request.error)) {
        shell.logger.warn('database unavailable; the store is replaced on the next invocation', {
          error: errorFields(request.error),
        });
      }
    },
  });
}

/** What started a tick, for its log line. */
export function triggerOf(event: TickEvent): string {
  if (event && 'trigger' in event && typeof event.trigger === 'string') return event.trigger;
  if (event && 'detail-type' in event) return 'schedule';
  return 'unknown';
}
