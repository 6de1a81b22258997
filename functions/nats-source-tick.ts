import { errorFields, isStoreUnavailable, StoreUnavailableError } from '@queuebox/core';
import { FUNCTION_ENV, METRICS } from '@queuebox/deploy-contract';
import type { BrokerIngestion } from '@queuebox/inbox';
import { createNatsSource, type NatsPullReport, type NatsSource } from '@queuebox/nats';
import { checkHealth } from '@queuebox/use-cases';
import type { Context } from 'aws-lambda';
import { addCounts, publishGaugesAfterWrite } from './lambda-shell/gauges.ts';
import {
  createShell,
  lambda,
  type ShellOptions,
  STORE_TRY_MARGIN_MS,
  storeTryBeforeTimeout,
  type TickEvent,
  triggerOf,
} from './lambda-shell/lambda.ts';

/**
 * nats-source-tick (EventBridge schedule): for each NATS source, pulls bounded batches from its JetStream durable
 * consumer, stores them in the inbox and acks them, until the consumer is empty or the budget is spent; publishes
 * the inbox gauges when a message was stored dead; wakes relay-tick when a push row was stored. The NATS
 * connections live as long as the container, as long as the source's settings stay what they were: when the
 * configuration read again (every 5 minutes, with its secrets) changes a source's settings (a rotated credential,
 * another stream or consumer) or drops the source, its connection is closed and a changed source connects anew. A pull that failed fails the invocation after every source had its
 * turn (the messages it could not store are redelivered).
 *
 * A store outage ends the invocation at once instead of at its budget: the first ingestion that finds the database
 * unavailable aborts every pull of the invocation, so the source gives the messages it holds back unacknowledged
 * (a plain `nak`, redelivered at once, nothing stored, nothing dead) and the sources after it fetch nothing; the
 * invocation fails with the outage. Holding the messages to the end of the budget, as the local runtime does, would
 * bill the function's whole timeout on every tick of the outage for messages that are given back anyway. While the
 * container knows the database as away, each tick first asks the database (`ping`, at most 2 s) and, when it still
 * does not answer, fails before fetching: every fetch is one more delivery of the messages, which a consumer's
 * `max_deliver` counts. A silent database (connections open, no answer) is an outage too: each store try is given
 * up {@link STORE_TRY_MARGIN_MS} before the function's timeout (at most half the invocation), which
 * `database.queryTimeoutMs` may outlast; a try that still commits after it was given up makes the redelivery a
 * duplicate.
 */
export function createHandler(options: ShellOptions = {}) {
  const shell = createShell(options);
  const wakeRelay = shell.wakeUp(FUNCTION_ENV.relayTickFunction);
  // By source name: the source and the settings it was made with (the configuration's values, secrets resolved).
  const sources = new Map<string, { readonly settings: string; readonly nats: NatsSource }>();
  const closeSource = async (name: string) => {
    const held = sources.get(name);
    sources.delete(name);
    await held?.nats.close().catch((error: unknown) => {
      shell.logger.warn('closing a nats source failed', { source: name, error: errorFields(error) });
    });
  };
  // The sources outlive a replaced store: they ingest through whatever services the current invocation has, and
  // stop the current invocation's pulls at its first store outage.
  let ingestion: BrokerIngestion | undefined;
  /** The store of the current invocation's services (a closed one is replaced when the configuration is read again). */
  let currentStore: { installId(): Promise<string> } | undefined;
  /** The invocation under way: its store tries end before its timeout. */
  let invocation: Context | undefined;
  let outage: AbortController | undefined;
  /** Whether the last thing this container learnt of the database is that it is away. */
  let storeAway = false;
  const port = {
    ingest: async (source: string, message: Parameters<BrokerIngestion['ingest']>[1]) => {
      if (!ingestion) throw new Error('nats-source-tick: no services yet');
      try {
        const work = ingestion.ingest(source, message);
        const result = await (invocation === undefined ? work : storeTryBeforeTimeout(work, invocation));
        storeAway = false;
        return result;
      } catch (error) {
        if (isStoreUnavailable(error)) {
          storeAway = true;
          outage?.abort(error);
        }
        throw error;
      }
    },
  };
  return lambda(shell, async (event: TickEvent, context: Context) => {
    const { config, services, store } = await shell.cache.get();
    ingestion = services.brokerIngestion;
    currentStore = store;
    invocation = context;
    const deadline = shell.deadline(context);
    if (storeAway) {
      // Still away: fail before a fetch delivers the messages once more.
      const health = await checkHealth(store, { timeoutMs: 2000 });
      if (health.status !== 200) {
        throw new StoreUnavailableError(
          'nats-source-tick: the database is still unavailable; nothing fetched',
          {
            cause: health.error,
          },
        );
      }
      storeAway = false;
    }
    outage = new AbortController();
    const signal = outage.signal;
    const reports: Record<string, NatsPullReport> = {};
    let failure: unknown;
    for (const name of [...sources.keys()]) {
      if (config.sources[name]?.type !== 'nats') await closeSource(name);
    }
    for (const [name, source] of Object.entries(config.sources)) {
      if (source.type !== 'nats') continue;
      const settings = JSON.stringify(source);
      let held = sources.get(name);
      if (held?.settings !== settings) {
        await closeSource(name);
        held = {
          settings,
          nats: createNatsSource({
            ...source,
            source: name,
            ingestion: port,
            logger: shell.outboxLogger,
            // The current store, not this invocation's: the source outlives it (a reload closes the old one).
            installId: () =>
              currentStore === undefined
                ? Promise.reject(new Error('nats-source-tick: no store yet'))
                : currentStore.installId(),
          }),
        };
        sources.set(name, held);
      }
      const report = await held.nats.pull({ deadline, signal });
      reports[name] = report;
      // Aborted by the outage another source met: it fetched nothing.
      if (report.stoppedFor === 'aborted') failure ??= signal.reason;
      if (report.stoppedFor === 'error') {
        shell.logger.error('nats pull failed', { source: name, error: errorFields(report.error) });
        failure ??= report.error;
      }
    }
    const pulled = Object.values(reports);
    const total = (count: 'stored' | 'duplicate' | 'dead') => pulled.reduce((sum, r) => sum + r[count], 0);
    // A message stored dead moves the inbox DeadRows gauge (and its alarm) at once, as the broker sources do: once
    // per tick, after every source had its turn. Before the counters: publishing the gauges flushes what is stored
    // under their Table dimension, which would move the counters into another series.
    if (total('dead') > 0) await publishGaugesAfterWrite(shell, store, ['inbox']);
    addCounts(shell.metrics, {
      [METRICS.accepted]: total('stored'),
      [METRICS.duplicate]: total('duplicate'),
      [METRICS.dead]: total('dead'),
    });
    const wokeRelay = pulled.some((r) => r.wakeRelay) && (await wakeRelay.request());
    shell.logger.info('nats pull', {
      trigger: triggerOf(event),
      sources: Object.fromEntries(Object.entries(reports).map(([name, { error: _e, ...r }]) => [name, r])),
      wokeRelay,
    });
    if (failure !== undefined) throw failure instanceof Error ? failure : new Error(String(failure));
    return reports;
  });
}

export const handler = createHandler();
