/**
 * The message id of HTTP deliveries (`Idempotency-Key`, `webhook-id`): the schema's install id and the row id, so
 * row 1 of two QueueBox installs are two messages to a receiver, and every attempt of one row is the same message.
 * On the test PostgreSQL, with a loopback receiver; signatures verified by `standardwebhooks` and `svix`.
 */
import type { ClaimedOutboxRow, OutboxStore, RowId, Store } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { messageIdsOf } from '@queuebox/testing';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_MESSAGE_ID } from '../src/delivery.ts';
import {
  anOutboxMessage,
  aPoller,
  DATABASE_URL,
  destinationsFor,
  insert,
  receiver,
  rowOf,
  SCHEMA,
  SECRET,
  soon,
  sql,
  store,
  untilDue,
  usePollerDatabase,
} from './support/poller-harness.ts';

usePollerDatabase();

/** A second install in the same database, as another service's QueueBox would have. */
const OTHER_SCHEMA = `${SCHEMA}_other`;
let other: Store;
beforeAll(async () => {
  other = await openPostgresStore({ url: DATABASE_URL, schema: OTHER_SCHEMA });
  await other.migrate();
});
afterAll(async () => {
  await other?.close();
  await sql(`DROP SCHEMA IF EXISTS "${OTHER_SCHEMA}" CASCADE`);
});

const signed = () => destinationsFor({ signing: { scheme: 'standard-webhooks', secrets: [SECRET] } });
/** <install id>-<row id>-<uid> (migration 0009). */
const MESSAGE_ID = /^[0-9a-f]{32}-\d+-[0-9a-f]{32}$/;

describe('HTTP deliveries carry the message id, not the bare row id', () => {
  it('sends row 1 of two installs under two ids, each <install id>-1-<uid>, signed so that both libraries verify', async () => {
    // Prepare: both schemas start their identities afresh, so each one's first row is row 1.
    await sql(`ALTER TABLE "${SCHEMA}".outbox ALTER COLUMN id RESTART WITH 1`);
    const [mine] = await insert({ payload: { from: 'orders' } });
    const [theirs] = await other.outbox.insert([anOutboxMessage({ payload: { from: 'billing' } })]);

    // Act
    const reports = [
      await aPoller({ destinations: signed() }).drain(soon()),
      await aPoller({ store: other.outbox, destinations: signed() }).drain(soon()),
    ];

    // Assess
    expect([mine, theirs]).toEqual(['1', '1']);
    expect(reports.map((r) => r.sent)).toEqual([1, 1]);
    const [first, second] = receiver.requests;
    expect(first?.headers['idempotency-key']).toMatch(MESSAGE_ID);
    expect(first?.headers['idempotency-key']).not.toBe(second?.headers['idempotency-key']);
    const expected = [...(await messageIdsOf(store, ['1'])), ...(await messageIdsOf(other, ['1']))];
    expect(expected[0]?.startsWith(`${await store.installId()}-1-`)).toBe(true);
    expect([first?.headers['idempotency-key'], second?.headers['idempotency-key']]).toEqual(expected);
    expect([first?.headers['webhook-id'], second?.headers['webhook-id']]).toEqual(expected);
    for (const request of receiver.requests) {
      expect(new StandardWebhook(SECRET).verify(request.body, request.headers)).toEqual(
        JSON.parse(request.body),
      );
      expect(() => new SvixWebhook(SECRET).verify(request.body, request.headers)).not.toThrow();
    }
  });

  it('sends every attempt of a row under the same id', async () => {
    // Prepare: the receiver fails the first attempt.
    let calls = 0;
    receiver.handle((_request, response) => {
      calls++;
      response.writeHead(calls === 1 ? 503 : 200).end();
    });
    const [id] = (await insert({ maxAttempts: 3 })) as [RowId];
    const poller = aPoller({ destinations: signed() });

    // Act
    const first = await poller.drain(soon());
    await untilDue([id]);
    const second = await poller.drain(soon());

    // Assess
    expect([first.retried, second.sent]).toEqual([1, 1]);
    expect((await rowOf(id)).attempt).toBe(1);
    const keys = receiver.requests.map((r) => r.headers['idempotency-key']);
    expect(keys[0]).toMatch(MESSAGE_ID);
    const [messageId] = await messageIdsOf(store, [id]);
    expect(keys).toEqual([messageId, messageId]);
    expect(receiver.requests.map((r) => r.headers['webhook-id'])).toEqual(keys);
  });

  it('does not send a row that its claim gave no message id: it is given back untried and the drain fails', async () => {
    // Prepare: an outbox whose claims drop the message id (an outbox store without `withMessageIds`).
    const bare: OutboxStore = {
      ...store.outbox,
      claim: async (options) =>
        ((await store.outbox.claim(options)) as ClaimedOutboxRow[]).map(
          ({ messageId: _dropped, ...row }) => row,
        ),
    };
    const [id] = (await insert({ maxAttempts: 3 })) as [RowId];

    // Act
    const drained = aPoller({ store: bare }).drain(soon());

    // Assess: a clear failure (the loop logs it and backs off), no request, no attempt burnt.
    await expect(drained).rejects.toThrow(NO_MESSAGE_ID);
    expect(receiver.requests).toEqual([]);
    expect(await rowOf(id)).toMatchObject({ state: 'Pending', attempt: 0, claimToken: null });
  });
});
