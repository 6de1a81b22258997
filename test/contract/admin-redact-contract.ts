/** The admin port of the store contract: redact, the erasure of one final row's message data. */
import { type InboxRow, MessageState, type OutboxRow, type RowId } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { adminContractKit, HOUR_MS } from './admin-contract-kit.ts';
import {
  anInboxMessage,
  anOutboxMessage,
  type CurrentHarness,
  claimOf,
  LEASE_MS,
  unique,
} from './fixtures.ts';

/** What a redact leaves of an outbox row: the row as it was, without its message data. */
function redactedOutbox(row: OutboxRow): OutboxRow {
  return { ...row, payload: null, headers: {}, lastError: null };
}

/** What a redact leaves of an inbox row: as above, and no aggregate or correlation id either. */
function redactedInbox(row: InboxRow): InboxRow {
  return { ...row, payload: null, headers: {}, lastError: null, aggregateId: null, correlationId: null };
}

export function adminRedactContract(current: CurrentHarness): void {
  const { admin, outbox, inbox, getOutbox, getInbox, outboxRows } = adminContractKit(current);

  /** An outbox row with every field a redact clears set: a failed attempt (last_error), then sent or dead. */
  async function failedOnceOutboxRow(settle: 'sent' | 'dead'): Promise<RowId> {
    const [id] = (await outbox().insert([
      anOutboxMessage({
        topic: 'customers.updated',
        key: 'customer-7',
        payload: { email: 'ada@example.com', name: 'Ada' },
        headers: { 'X-Customer': 'ada@example.com' },
      }),
    ])) as [RowId];
    const [first] = await outbox().claim({ batchSize: 10, leaseMs: LEASE_MS });
    await outbox().retry([
      { ...claimOf(first as OutboxRow), error: 'HTTP 500: ada@example.com', delayMs: 0 },
    ]);
    await current().makeDue('outbox', [id]);
    const [second] = await outbox().claim({ batchSize: 10, leaseMs: LEASE_MS });
    const claim = claimOf(second as OutboxRow);
    if (settle === 'sent') await outbox().markSent([{ ...claim, destination: 'crm' }]);
    else await outbox().markDead([{ ...claim, reason: 'HTTP 410: ada@example.com', attempted: true }]);
    return id;
  }

  /**
   * An inbox row of `source` with headers, an aggregate and a correlation id: processed after a pull worker's failed
   * attempt (last_error), or dead as a broker source stores a message it cannot take.
   */
  async function inboxRowWithData(settle: 'processed' | 'dead', source = unique('crm')): Promise<RowId> {
    const message = anInboxMessage({
      source,
      eventType: 'customer.updated',
      aggregateId: 'cus_ada',
      correlationId: 'corr-ada',
      payload: { email: 'ada@example.com' },
      headers: { 'x-customer-email': 'ada@example.com' },
    });
    if (settle === 'dead') return (await inbox().storeDead(message, 'not JSON: ada@example.com')).id;
    const { id } = await inbox().store(message);
    const take = async () =>
      claimOf(
        ((await inbox().claim({ sources: [source], batchSize: 10, leaseMs: LEASE_MS })) as [InboxRow])[0],
      );
    await inbox().retry([{ ...(await take()), error: 'worker failed for ada@example.com', delayMs: 0 }]);
    await current().makeDue('inbox', [id]);
    await inbox().markProcessed([await take()]);
    return id;
  }

  describe('admin: redact', () => {
    it.each(['sent', 'dead'] as const)(
      'outbox: a %s row keeps everything but its payload (null), headers ({}) and last_error (NULL)',
      async (settle) => {
        const id = await failedOnceOutboxRow(settle);
        const before = await getOutbox(id);
        expect(before.lastError).not.toBeNull();

        const result = await admin().redact('outbox', id);

        expect(result).toEqual({ status: 'redacted' });
        expect(await getOutbox(id)).toEqual(redactedOutbox(before));
      },
    );

    it.each(['processed', 'dead'] as const)(
      'inbox: a %s row keeps its state, source and idempotency key; its payload, headers, last_error, aggregate and correlation id are cleared',
      async (settle) => {
        const id = await inboxRowWithData(settle);
        const before = await getInbox(id);
        expect(before).toMatchObject({ aggregateId: 'cus_ada', correlationId: 'corr-ada' });
        expect(before.lastError).not.toBeNull();

        const result = await admin().redact('inbox', id);

        expect(result).toEqual({ status: 'redacted' });
        expect(await getInbox(id)).toEqual(redactedInbox(before));
      },
    );

    it("inbox: a sender's retry of a redacted row's idempotency key is still answered duplicate", async () => {
      const source = unique('crm');
      const id = await inboxRowWithData('processed', source);
      const { idempotencyKey } = await getInbox(id);
      await admin().redact('inbox', id);

      const again = await inbox().store(anInboxMessage({ source, idempotencyKey, payload: { email: 'x' } }));

      expect(again).toEqual({ status: 'duplicate', id });
      expect((await getInbox(id)).payload).toBeNull();
    });

    it('leaves updated_at as it was: retention deletes a redacted row when it would have', async () => {
      const sent = await failedOnceOutboxRow('sent');
      const processed = await inboxRowWithData('processed');
      await current().backdate('outbox', [sent], 2 * HOUR_MS);
      await current().backdate('inbox', [processed], 2 * HOUR_MS);
      await admin().redact('outbox', sent);
      await admin().redact('inbox', processed);

      const purge = (table: 'outbox' | 'inbox') =>
        admin().purge({ table, state: 'Sent', olderThanMs: HOUR_MS, batchSize: 10 });

      expect([await purge('outbox'), await purge('inbox')]).toEqual([1, 1]);
    });

    it('refuses a pending or processing row (not_final, with its state) and changes nothing', async () => {
      const [pending] = (await outboxRows(1, 'pending', { payload: { email: 'a@example.com' } })) as [RowId];
      const [processing] = (await outbox().insert([anOutboxMessage({ headers: { 'X-A': 'a' } })])) as [RowId];
      const claimed = await outbox().claim({ batchSize: 10, leaseMs: LEASE_MS });
      await outbox().release(claimed.filter((r) => r.id !== processing).map(claimOf));
      const { id: inboxPending } = await inbox().store(
        anInboxMessage({ source: unique('crm'), aggregateId: 'c1' }),
      );
      const taken = unique('crm');
      const { id: inboxProcessing } = await inbox().store(anInboxMessage({ source: taken }));
      await inbox().claim({ sources: [taken], batchSize: 1, leaseMs: LEASE_MS });
      const before = await Promise.all([getOutbox(pending), getOutbox(processing)]);
      const inboxBefore = await Promise.all([getInbox(inboxPending), getInbox(inboxProcessing)]);

      const answers = [
        await admin().redact('outbox', pending),
        await admin().redact('outbox', processing),
        await admin().redact('inbox', inboxPending),
        await admin().redact('inbox', inboxProcessing),
      ];

      expect(answers).toEqual([
        { status: 'not_final', state: MessageState.Pending },
        { status: 'not_final', state: MessageState.Processing },
        { status: 'not_final', state: MessageState.Pending },
        { status: 'not_final', state: MessageState.Processing },
      ]);
      expect(await Promise.all([getOutbox(pending), getOutbox(processing)])).toEqual(before);
      expect(await Promise.all([getInbox(inboxPending), getInbox(inboxProcessing)])).toEqual(inboxBefore);
    });

    it('refuses a row in a state this version does not know (Failed): it may be live for a newer one', async () => {
      const [id] = (await outboxRows(1, 'sent', { payload: { keep: true } })) as [RowId];
      await current().setStateLiteral('outbox', id, 'parked');

      expect(await admin().redact('outbox', id)).toEqual({ status: 'not_final', state: MessageState.Failed });
      expect((await getOutbox(id)).payload).toEqual({ keep: true });
    });

    it('answers not_found for missing or malformed ids, and redacts a redacted row again', async () => {
      const [sent] = (await outboxRows(1, 'sent')) as [RowId];

      expect(await admin().redact('outbox', '999999999999')).toEqual({ status: 'not_found' });
      expect(await admin().redact('inbox', '999999999999')).toEqual({ status: 'not_found' });
      expect(await admin().redact('outbox', 'nope')).toEqual({ status: 'not_found' });
      expect(await admin().redact('outbox', sent)).toEqual({ status: 'redacted' });
      expect(await admin().redact('outbox', sent)).toEqual({ status: 'redacted' });
      // The inbox row of the same id is another row: an outbox id never names it.
      expect(await admin().redact('inbox', sent)).toEqual({ status: 'not_found' });
    });

    it('an inbox redact leaves the outbox row the relay forwarded from it; that row is redacted on its own', async () => {
      const source = unique('crm');
      const { id } = await inbox().store(
        anInboxMessage({
          source,
          payload: { email: 'ada@example.com' },
          headers: { 'x-email': 'ada@example.com' },
        }),
      );
      const [claimed] = (await inbox().claim({ sources: [source], batchSize: 1, leaseMs: LEASE_MS })) as [
        InboxRow,
      ];
      const { outboxIds } = await inbox().forward([
        {
          ...claimOf(claimed),
          outbox: anOutboxMessage({
            payload: claimed.payload,
            headers: { ...claimed.headers, 'x-inbox-id': id, 'x-source': source },
          }),
        },
      ]);
      const forwarded = outboxIds[0] as RowId;

      expect(await admin().redact('inbox', id)).toEqual({ status: 'redacted' });
      expect(await getOutbox(forwarded)).toMatchObject({
        payload: { email: 'ada@example.com' },
        headers: { 'x-inbox-id': id },
        state: MessageState.Pending,
      });
      // Pending: being delivered, so refused until it is sent (or dead).
      expect(await admin().redact('outbox', forwarded)).toEqual({
        status: 'not_final',
        state: MessageState.Pending,
      });
      const [delivering] = await outbox().claim({ batchSize: 10, leaseMs: LEASE_MS });
      await outbox().markSent([{ ...claimOf(delivering as OutboxRow), destination: 'crm' }]);
      expect(await admin().redact('outbox', forwarded)).toEqual({ status: 'redacted' });
      expect(await getOutbox(forwarded)).toMatchObject({
        payload: null,
        headers: {},
        state: MessageState.Sent,
      });
    });
  });
}
