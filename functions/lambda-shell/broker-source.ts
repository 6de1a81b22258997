import type { QueueBoxConfig } from '@queuebox/config';
import { type BrokerBatchReport, errorFields, StoreUnavailableError } from '@queuebox/core';
import { FUNCTION_ENV, METRICS } from '@queuebox/deploy-contract';
import type { Services } from '@queuebox/use-cases';
import { addCounts, publishGaugesAfterWrite } from './gauges.ts';
import { createShell, lambda, type ShellOptions } from './lambda.ts';

/** What a broker event adapter is built from: the services' broker ingestion and the configured sources. */
export interface BrokerAdapterDeps {
  readonly ingestion: Services['brokerIngestion'];
  readonly sources: QueueBoxConfig['sources'];
}

/** One broker event source function: how to read its event, and what to log. */
export interface BrokerSourceSpec<E> {
  /** Builds the adapter that stores one event's messages (once per set of services). */
  readonly adapter: (deps: BrokerAdapterDeps) => (event: E) => Promise<BrokerBatchReport>;
  /** The info line logged per event. */
  readonly logLine: string;
  /** Fields of the event added to that line. Default none. */
  readonly logFields?: (event: E) => Readonly<Record<string, unknown>>;
}

/**
 * What the invocation throws when storing a batch failed: the Lambda runtime logs a thrown error's message, and one
 * message's error may quote it (a transform function's `throw new Error(\`no customer ${email}\`)`, a value the
 * database refused): an outside log audit found a payload's e-mail address in the function's log on every retry.
 * The error it throws names the cause's class and code only, and keeps the cause (`cause`) for the code that catches
 * it; the message's row keeps the text in its `last_error` once it becomes a dead row. An unavailable database is
 * thrown as it is (its text is the driver's, and the shell replaces the store on it).
 */
function withoutMessageText(error: unknown): unknown {
  if (error instanceof StoreUnavailableError) return error;
  const { name, code } = errorFields(error);
  return new Error(
    `storing a message of the batch failed (${name}${code === undefined ? '' : ` ${code}`}; its text is left out of the log, as it may quote the message): Lambda hands the batch back, and a message that keeps failing becomes a dead row with the error in its last_error`,
    { cause: error },
  );
}

/**
 * The handler of a broker event source function (amqp-source, kafka-source): stores the event's messages through
 * the adapter, counts stored / duplicate / dead, and wakes relay-tick when a push row was stored. A failure fails
 * the invocation, so Lambda hands the batch back and what was stored comes again as duplicates.
 */
export function createBrokerSourceHandler<E>(spec: BrokerSourceSpec<E>, options: ShellOptions = {}) {
  const shell = createShell(options);
  const wakeRelay = shell.wakeUp(FUNCTION_ENV.relayTickFunction);
  const adapters = new WeakMap<Services, (event: E) => Promise<BrokerBatchReport>>();
  return lambda(shell, async (event: E) => {
    const { config, services, store } = await shell.cache.get();
    let handle = adapters.get(services);
    if (!handle) {
      handle = spec.adapter({ ingestion: services.brokerIngestion, sources: config.sources });
      adapters.set(services, handle);
    }
    let report: BrokerBatchReport;
    try {
      report = await handle(event);
    } catch (error) {
      throw withoutMessageText(error);
    }
    // A message stored dead moves the inbox DeadRows gauge (and its alarm) at once.
    if (report.dead > 0) await publishGaugesAfterWrite(shell, store, ['inbox']);
    addCounts(shell.metrics, {
      [METRICS.accepted]: report.stored,
      [METRICS.duplicate]: report.duplicate,
      [METRICS.dead]: report.dead,
    });
    const wokeRelay = report.wakeRelay && (await wakeRelay.request());
    shell.logger.info(spec.logLine, { ...spec.logFields?.(event), ...report, wokeRelay });
    return report;
  });
}
