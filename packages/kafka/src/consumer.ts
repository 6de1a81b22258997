import type { BrokerIngestionPort, BrokerIngestResult, BrokerMessage } from '@queuebox/core';
import type { Consumer } from 'kafkajs';
import { createKafkaClient, type KafkaClientOptions } from './client.ts';
import { consumedRecordMessage } from './records.ts';

/** `sources.<name>` of `type: kafka`, the fields the consumer reads (the validated configuration fits). */
export interface KafkaSourceOptions {
  readonly brokers: readonly string[];
  readonly topics: readonly string[];
  /** Consumer group. Default `queuebox-{source}`. */
  readonly groupId?: string;
}

/** Options of the long-lived consumer group member. */
export interface KafkaConsumerOptions extends KafkaSourceOptions, Omit<KafkaClientOptions, 'brokers'> {
  /** The source's name: what `ingest` is called with. */
  readonly source: string;
  readonly ingestion: BrokerIngestionPort;
  /**
   * Where a group without committed offsets starts: the earliest record (true) or only new ones (false).
   * Default true: records written before QueueBox first ran are not skipped.
   */
  readonly fromBeginning?: boolean;
  /**
   * How long one fetch waits on the broker for new records. It bounds how long `close()` waits for the fetch in
   * flight. Default 1000 ms (kafkajs's own default is 5000).
   */
  readonly maxWaitTimeMs?: number;
  /** Pause between attempts at a record whose ingestion failed (database down, or a bug). Default 1000 ms. */
  readonly retryDelayMs?: number;
  readonly onIngested?: (result: BrokerIngestResult, message: BrokerMessage) => void;
  readonly onError?: (error: unknown, context: { readonly during: 'ingest' | 'commit' | 'consume' }) => void;
}

/** A running consumer. */
export interface KafkaConsumer {
  /** Joins the group and starts consuming; resolves once the consumer runs (it keeps rejoining by itself). */
  start(): Promise<void>;
  /** Stops after the record in hand, commits what was stored, leaves the group. */
  close(): Promise<void>;
}

/**
 * The long-lived Kafka consumer of a source for the local runtime: a kafkajs consumer-group member (kafkajs
 * rejoins and reconnects by itself). Records of a partition are stored one after another; an offset is committed
 * only after its inbox row (pending or dead) committed — after each fetched batch, and before leaving. A record
 * whose ingestion fails is tried again every `retryDelayMs` (with heartbeats, so the member keeps its
 * partitions) and never skipped, so a database outage holds the partition until the database is back; when the
 * member stops or loses the partition meanwhile, nothing past the stored records is committed and the next owner
 * starts at the failed record.
 */
export function createKafkaConsumer(options: KafkaConsumerOptions): KafkaConsumer {
  const retryDelayMs = options.retryDelayMs ?? 1000;
  const kafka = createKafkaClient(options);
  const consumer: Consumer = kafka.consumer({
    groupId: options.groupId ?? `queuebox-${options.source}`,
    maxWaitTimeInMs: options.maxWaitTimeMs ?? 1000,
  });
  let stopping = false;
  const wakers = new Set<() => void>();
  const report = (error: unknown, during: 'ingest' | 'commit' | 'consume') => {
    try {
      options.onError?.(error, { during });
    } catch {
      // A logging hook must not stop the consumer.
    }
  };
  consumer.on(consumer.events.CRASH, (event) => {
    report(event.payload.error, 'consume');
    // kafkajs restarts by itself after a retriable error only. After any other (a bug in the batch handler, a
    // record it cannot read) it has disconnected and stays out of the group: the partitions would stall for good.
    if (!event.payload.restart && !stopping && !rejoining) void rejoin();
  });

  /** Whether a rejoin runs: a second crash meanwhile must not start another one that disconnects the first's. */
  let rejoining = false;

  /** Joins the group again after a crash kafkajs does not restart from, every `retryDelayMs` until it works. */
  async function rejoin(): Promise<void> {
    rejoining = true;
    try {
      while (!stopping) {
        await pause(retryDelayMs);
        if (stopping) return;
        try {
          await start();
          return;
        } catch (error) {
          report(error, 'consume');
          await consumer.disconnect().catch(() => undefined);
        }
      }
    } finally {
      rejoining = false;
    }
  }

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      if (stopping) return resolve();
      const wake = () => {
        clearTimeout(timer);
        wakers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      wakers.add(wake);
    });

  async function start() {
    await consumer.connect();
    for (const topic of options.topics) {
      await consumer.subscribe({ topic, fromBeginning: options.fromBeginning ?? true });
    }
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
        let stored: string | undefined;
        const commit = async () => {
          if (stored === undefined) return;
          const offset = (BigInt(stored) + 1n).toString();
          try {
            await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset }]);
          } catch (error) {
            // Not fatal: the records are stored, so a redelivery only yields duplicates.
            report(error, 'commit');
          }
        };
        const alive = () => !stopping && isRunning() && !isStale();
        for (const record of batch.messages) {
          if (!alive()) break;
          let message: BrokerMessage;
          try {
            message = consumedRecordMessage(batch.topic, batch.partition, record);
          } catch (error) {
            // A record whose headers cannot be read is stored without them rather than stall its partition.
            report(error, 'consume');
            message = consumedRecordMessage(batch.topic, batch.partition, { ...record, headers: {} });
          }
          let result: BrokerIngestResult | undefined;
          while (result === undefined) {
            try {
              result = await options.ingestion.ingest(options.source, message);
            } catch (error) {
              report(error, 'ingest');
              if (!alive()) break;
              await pause(retryDelayMs);
              await heartbeat().catch(() => undefined);
              if (!alive()) break;
            }
          }
          if (result === undefined) break;
          resolveOffset(record.offset);
          stored = record.offset;
          options.onIngested?.(result, message);
          await heartbeat().catch(() => undefined);
        }
        await commit();
      },
    });
  }

  return {
    start,
    async close() {
      stopping = true;
      for (const wake of [...wakers]) wake();
      await consumer.disconnect();
    },
  };
}
