/**
 * `outbox.maxPayloadBytes` from the configuration reaches the outbox poller that `createServices` builds — the
 * assembly the local runtime and outbox-tick both drain — on real PostgreSQL, delivering to a real HTTP receiver
 * on 127.0.0.1: a payload over the configured limit (left out of the claim, as every payload over 64 KiB) is never
 * read nor sent, and its delivery fails with its size and the limit; with the default (64 MiB) the same row is sent.
 * The key's bounds: packages/config/test/outbox-payload-limits.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseConfig, type QueueBoxConfigInput } from '@queuebox/config';
import type { JsonValue, NewOutboxMessage, Store } from '@queuebox/core';
import { defaultPublisherFactories } from '@queuebox/outbox';
import { openStore } from '@queuebox/store';
import { dropSchemasAfterPass, freshSchemaName, testPool, testPostgresUrl } from '@queuebox/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createServices } from '../src/services.ts';

const schema = freshSchemaName('lp_payload_limits');
dropSchemasAfterPass(() => [schema]);
const pool = testPool(1);
let server: Server;
let url: string;
/** The `n` of every request body the receiver got. */
const received: number[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { n: number }).n);
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/in`;
});
afterEach(async () => {
  received.length = 0;
  await pool.query(`DELETE FROM "${schema}".outbox`).catch(() => undefined);
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await pool.end();
});

/** The configuration as a file would give it, with `outbox` on top of a destination and a route. */
const configWith = (outbox: QueueBoxConfigInput['outbox']) =>
  parseConfig({
    database: { url: testPostgresUrl(), schema, poolSize: 2 },
    outbox,
    destinations: { hook: { type: 'http', url } },
    routes: [{ match: 'orders.#', destination: 'hook' }],
  });

/** A payload of about `bytes` bytes of JSON that PostgreSQL cannot compress (random hex). */
const payloadOf = (n: number, bytes: number): JsonValue => ({
  n,
  blob: randomBytes(Math.floor(bytes / 2)).toString('hex'),
});
const message = (payload: JsonValue): NewOutboxMessage => ({
  topic: 'orders.big',
  key: null,
  payload,
  headers: {},
  maxAttempts: 3,
});

/** Opens the store of `config`, as the runtime does, and drains its services' poller once. */
async function drainWith(config: ReturnType<typeof configWith>, rows: readonly NewOutboxMessage[]) {
  const store: Store = await openStore(config.database);
  try {
    await store.migrate();
    const ids = await store.outbox.insert(rows);
    const services = createServices(config, store, { publisherFactories: defaultPublisherFactories });
    try {
      const report = await services.poller.drain({ deadline: Date.now() + 20_000 });
      return { ids, report };
    } finally {
      await services.close();
    }
  } finally {
    await store.close();
  }
}

describe('outbox.maxPayloadBytes, through the configuration to the poller', () => {
  it('fails the delivery of a payload over the configured limit with its size and the limit, never sending it', async () => {
    // Prepare: a limit of 80 KiB; a row of about 100 KiB (left out of the claim) and a small one
    const config = configWith({ maxPayloadBytes: 81_920, largePayloadBudgetBytes: 65_536 });
    expect(config.outbox.maxPayloadBytes).toBe(81_920);

    // Act
    const { ids, report } = await drainWith(config, [message(payloadOf(1, 100 * 1024)), message({ n: 2 })]);

    // Assess: the small row sent, the large one retried with the clear error, unsent
    expect(report).toMatchObject({ sent: 1, retried: 1, dead: 0 });
    expect(received).toEqual([2]);
    const { rows } = await pool.query(
      `SELECT id::text, state, attempt, last_error FROM "${schema}".outbox ORDER BY id`,
    );
    expect(rows).toEqual([
      {
        id: ids[0],
        state: 'pending',
        attempt: 1,
        last_error: expect.stringMatching(
          /^payload of 1024\d\d bytes is over the largest this poller delivers \(81920 bytes\)$/,
        ),
      },
      { id: ids[1], state: 'sent', attempt: 0, last_error: null },
    ]);
  });

  it('sends the same row under the default limit (64 MiB)', async () => {
    // Prepare
    const config = configWith({});
    expect(config.outbox.maxPayloadBytes).toBe(64 * 1024 * 1024);

    // Act
    const { report } = await drainWith(config, [message(payloadOf(1, 100 * 1024)), message({ n: 2 })]);

    // Assess
    expect(report).toMatchObject({ sent: 2, retried: 0, dead: 0 });
    expect([...received].sort()).toEqual([1, 2]);
  });
});
