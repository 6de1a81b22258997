import {
  type BrokerIngestionPort,
  type BrokerIngestResult,
  type BrokerMessage,
  StoreUnavailableError,
} from '@queuebox/core';
import type { MSKEvent } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { createKafkaEventHandler } from '../src/index.ts';

/** An MSK event with `values` by `topic-partition` (offsets from `first`). */
function anMskEvent(partitions: Record<string, { first: number; values: string[] }>): MSKEvent {
  const records: MSKEvent['records'] = {};
  for (const [key, { first, values }] of Object.entries(partitions)) {
    const [, topic = '', partition = '0'] = /^(.*)-(\d+)$/.exec(key) ?? [];
    records[key] = values.map((value, i) => ({
      topic,
      partition: Number(partition),
      offset: first + i,
      timestamp: 1_796_000_000_000 + first + i,
      timestampType: 'CREATE_TIME',
      key: '',
      value: Buffer.from(value).toString('base64'),
      headers: [],
    }));
  }
  return {
    eventSource: 'aws:kafka',
    eventSourceArn:
      'arn:aws:kafka:eu-west-1:123456789012:cluster/queuebox/abcd1234-ab12-cd34-ef56-abcdef123456-1',
    bootstrapServers: 'b-1.queuebox.abc123.c2.kafka.eu-west-1.amazonaws.com:9098',
    records,
  };
}

/**
 * The broker ingestion port as the inbox answers it: a body `poison` fails (a transform function that throws on it),
 * `down` fails as a database outage, anything else is stored. Records what it was given, in order.
 */
function anIngestion(): BrokerIngestionPort & { readonly seen: string[] } {
  const seen: string[] = [];
  return {
    seen,
    async ingest(_source: string, message: BrokerMessage): Promise<BrokerIngestResult> {
      const body = Buffer.from(message.body).toString();
      seen.push(`${message.defaultIdempotencyKey?.split('@')[0]}=${body}`);
      if (body === 'poison') throw new Error('boom');
      if (body === 'down') throw new StoreUnavailableError('the database does not answer');
      return { status: 'stored', id: String(seen.length), wakeRelay: false };
    },
  };
}

const sources = { clicks: { type: 'kafka', topics: ['clicks'] } };

describe('the Kafka Lambda handler over partitions', () => {
  it('stores every partition on its own, stopping only the one with a poison record, then rejects', async () => {
    // Prepare
    const ingestion = anIngestion();
    const handle = createKafkaEventHandler({ ingestion, sources });
    const event = anMskEvent({
      'clicks-0': { first: 10, values: ['poison', 'after'] },
      'clicks-1': { first: 20, values: ['a', 'b'] },
    });

    // Act
    const outcome = await handle(event).catch((error: unknown) => error);

    // Assess
    expect(outcome).toEqual(new Error('boom'));
    expect(ingestion.seen).toEqual(['clicks:0:10=poison', 'clicks:1:20=a', 'clicks:1:21=b']);
  });

  it('answers the first failed record of each failed partition when the mapping reports batch item failures', async () => {
    // Prepare
    const ingestion = anIngestion();
    const handle = createKafkaEventHandler({ ingestion, sources, reportBatchItemFailures: true });
    const event = anMskEvent({
      'clicks-0': { first: 10, values: ['ok', 'poison', 'after'] },
      'clicks-1': { first: 20, values: ['a', 'b'] },
      'clicks-2': { first: 30, values: ['poison'] },
    });

    // Act
    const report = await handle(event);

    // Assess
    expect(report).toEqual({
      stored: 3,
      duplicate: 0,
      dead: 0,
      wakeRelay: false,
      batchItemFailures: [
        { itemIdentifier: { partition: 'clicks-0', offset: 11 } },
        { itemIdentifier: { partition: 'clicks-2', offset: 30 } },
      ],
    });
    expect(ingestion.seen).not.toContain('clicks:0:12=after');
  });

  it('answers no batch item failure when every record was stored', async () => {
    // Prepare
    const handle = createKafkaEventHandler({
      ingestion: anIngestion(),
      sources,
      reportBatchItemFailures: true,
    });

    // Act
    const report = await handle(anMskEvent({ 'clicks-0': { first: 0, values: ['a'] } }));

    // Assess
    expect(report).toEqual({ stored: 1, duplicate: 0, dead: 0, wakeRelay: false, batchItemFailures: [] });
  });

  it('rejects at once on a database outage, even when reporting batch item failures', async () => {
    // Prepare
    const ingestion = anIngestion();
    const handle = createKafkaEventHandler({ ingestion, sources, reportBatchItemFailures: true });
    const event = anMskEvent({
      'clicks-0': { first: 10, values: ['down', 'after'] },
      'clicks-1': { first: 20, values: ['a'] },
    });

    // Act
    const outcome = await handle(event).catch((error: unknown) => error);

    // Assess
    expect(outcome).toBeInstanceOf(StoreUnavailableError);
    expect(ingestion.seen).toEqual(['clicks:0:10=down']);
  });

  it("hands each record's key to the ingestion as x-kafka-key, replacing a producer's header of that name", async () => {
    // Prepare: a keyed record with a forged key header, then a record Lambda sent without a key.
    const messages: BrokerMessage[] = [];
    const handle = createKafkaEventHandler({
      ingestion: {
        async ingest(_source, message) {
          messages.push(message);
          return { status: 'stored', id: String(messages.length), wakeRelay: false };
        },
      },
      sources,
    });
    const event = anMskEvent({ 'clicks-0': { first: 0, values: ['{}', '{}'] } });
    const [keyed, keyless] = event.records['clicks-0'] ?? [];
    if (!keyed || !keyless) throw new Error('two records expected');
    keyed.key = Buffer.from('user-1').toString('base64');
    keyed.headers = [{ 'X-Kafka-Key': [...Buffer.from('user-2')] }];
    delete (keyless as { key?: string }).key;
    keyless.headers = [{ 'x-kafka-key': [...Buffer.from('user-3')] }];

    // Act
    await handle(event);

    // Assess
    expect(messages.map((m) => m.headers)).toEqual([{ 'x-kafka-key': 'user-1' }, {}]);
  });

  it('stores the records of a partition in offset order whatever the order of the event', async () => {
    // Prepare
    const ingestion = anIngestion();
    const handle = createKafkaEventHandler({ ingestion, sources });
    const event = anMskEvent({ 'clicks-0': { first: 5, values: ['x', 'y'] } });
    event.records['clicks-0']?.reverse();

    // Act
    await handle(event);

    // Assess
    expect(ingestion.seen).toEqual(['clicks:0:5=x', 'clicks:0:6=y']);
  });
});
