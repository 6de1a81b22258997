/**
 * kafka-source with a real-shaped MSK event of two partitions, one of which holds a poison record (a transform
 * function that throws on it), against the real PostgreSQL: the healthy partition's records are stored at the first
 * invocation, the poisoned partition keeps its order (nothing after the poison record is stored), and the invocation
 * still fails so that the event source mapping retries the batch.
 */

import type { TransformFunction } from '@queuebox/inbox';
import { requireServices, usePostgresSchema } from '@queuebox/testing';
import type { ServicesOptions } from '@queuebox/use-cases';
import { describe, expect, it } from 'vitest';
import { createHandler as createKafkaSource } from '../../functions/kafka-source.ts';
import {
  aLambdaContext,
  anInvokeRecorder,
  anMskEvent,
  useMigratedFunctions,
  writeConfigFile,
} from './support.ts';

const needs = await requireServices('function tests: kafka-source poison', ['postgres']);

/**
 * A database and one Kafka source; with `transform`, its transform function `boom` (registered in code by the test
 * only, so the migration's configuration names none).
 */
const yaml = (databaseUrl: string, schema: string, transform: boolean) => `database:
  url: ${JSON.stringify(databaseUrl)}
  schema: ${schema}
  poolSize: 2
sources:
  clicks:
    type: kafka
    brokers: [127.0.0.1:9092]
    topics: [clicks]
${transform ? '    transform:\n      function: boom\n' : ''}`;

describe.skipIf(needs.skipReason)('kafka-source with a poison record', () => {
  const { pool, schema } = usePostgresSchema(needs.url.postgres, 'kafka_fn_poison', 1);
  const install = useMigratedFunctions({
    databaseUrl: needs.url.postgres,
    schema,
    yaml: () => yaml(needs.url.postgres, schema.name, false),
  });

  /** kafka-source over the test's configuration, with the `boom` transform registered in code. */
  const kafkaSource = async () => {
    const file = await writeConfigFile(yaml(needs.url.postgres, schema.name, true));
    const shell = install.shell(file, {
      invoker: anInvokeRecorder(),
      env: { RELAY_TICK_FUNCTION_NAME: 'queuebox-test-RelayTick' },
    });
    const boom: TransformFunction = ({ payload }) => {
      if ((payload as { poison?: boolean }).poison) throw new Error('boom: no customer victim@example.com');
      return { payload };
    };
    const { createCache } = shell;
    if (!createCache) throw new Error('the test shell builds its caches');
    return createKafkaSource({
      logger: shell.logger,
      metrics: shell.metrics,
      invoker: shell.invoker,
      env: shell.env,
      createCache: (options) =>
        createCache({
          ...options,
          services: { ...(options.services as ServicesOptions), inboxTransforms: { boom } },
        }),
    });
  };

  /** An MSK event with the records of partitions 0 and 1 of topic `clicks`. */
  const twoPartitions = (
    zero: Parameters<typeof anMskEvent>[0],
    one: Parameters<typeof anMskEvent>[0],
  ): ReturnType<typeof anMskEvent> => {
    const first = anMskEvent(zero);
    const second = anMskEvent(one);
    return {
      ...first,
      records: {
        'clicks-0': first.records['clicks-0'] ?? [],
        'clicks-1': (second.records['clicks-0'] ?? []).map((r) => ({ ...r, partition: 1 })),
      },
    };
  };

  it('stores the healthy partitions of an event whose other partition holds a poison record, and still fails the invocation', async () => {
    // Prepare
    const handler = await kafkaSource();
    const event = twoPartitions(
      [
        { offset: 10, value: { poison: true } },
        { offset: 11, value: { n: 'after the poison' } },
      ],
      [
        { offset: 20, value: { n: 20 } },
        { offset: 21, value: { n: 21 } },
      ],
    );

    // Act
    const thrown = async () =>
      handler(event, aLambdaContext()).then(
        () => undefined,
        (error: unknown) => error as Error,
      );
    const first = await thrown();
    const retried = await thrown();

    // Assess: partition 1 stored at the first invocation (once); nothing of partition 0, not even its later record.
    // The Lambda runtime logs what the invocation throws: the transform's text (it quotes the payload) stays out of
    // it, and only the cause holds it.
    for (const error of [first, retried]) {
      expect(error?.message).toMatch(/^storing a message of the batch failed \(Error;/);
      expect(error?.message).not.toContain('victim@example.com');
      expect(String(error?.stack)).not.toContain('victim@example.com');
      expect(JSON.stringify(errorChain(error))).toContain('victim@example.com');
    }
    const { rows } = await pool.query<{ idempotency_key: string; state: string }>(
      `SELECT idempotency_key, state FROM "${schema.name}".inbox WHERE source = 'clicks' ORDER BY id`,
    );
    expect(rows.map((r) => [r.idempotency_key.split('@')[0], r.state])).toEqual([
      ['clicks:1:20', 'pending'],
      ['clicks:1:21', 'pending'],
    ]);
  });
});

/** The messages of `error` and its causes. */
function errorChain(error: unknown): string[] {
  const messages: string[] = [];
  for (let e = error, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++)
    messages.push(e.message);
  return messages;
}
