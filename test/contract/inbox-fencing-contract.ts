/** Fencing of every inbox settle, and duplicates, of the store contract. */
import { type InboxRow, MessageState, QueueBoxError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  allStale,
  anInboxMessage,
  type CurrentHarness,
  claimOf,
  foreignToken,
  sortedReport,
  unique,
} from './fixtures.ts';
import { inboxContractKit, OTHER_SOURCE, SOURCE } from './inbox-contract-kit.ts';

export function inboxFencingAndDuplicatesContract(current: CurrentHarness): void {
  const { inbox, claim, get, storeNew, claimOne, outboxCount, settleNames, settle } =
    inboxContractKit(current);

  describe('inbox fencing', () => {
    it.each(settleNames)(
      '%s with a foreign token changes nothing and reports the row stale',
      async (name) => {
        const id = await storeNew();
        const row = await claimOne(id);
        const before = await get(id);

        const report = await settle(name, { id, claimToken: foreignToken() });

        expect(sortedReport(report)).toEqual(allStale([id]));
        expect(await get(id)).toEqual(before);
        expect(await outboxCount()).toBe(0);
        expect((await settle(name, claimOf(row))).settled.map((s) => s.id)).toEqual([id]);
      },
    );

    it.each(settleNames)('%s with the token of a claim that was taken over is stale', async (name) => {
      const id = await storeNew();
      const lost = await claimOne(id);
      await current().expireLeases('inbox', [id]);
      const owner = await claimOne(id, { takeOverExpired: true });
      const before = await get(id);

      const report = await settle(name, claimOf(lost));

      expect(sortedReport(report)).toEqual(allStale([id]));
      expect(await get(id)).toEqual(before);
      expect(before).toMatchObject({ state: MessageState.Processing, claimToken: owner.claimToken });
      expect(await outboxCount()).toBe(0);
    });

    it.each(settleNames)(
      '%s of a row that is not processing (pending, processed, dead) is stale',
      async (name) => {
        const ids = [await storeNew(), await storeNew(), await storeNew()];
        const [pending, processed, dead] = ids as [string, string, string];
        const rows = new Map((await claim()).map((r) => [r.id, r]));
        const claimFor = (id: string) => claimOf(rows.get(id) as InboxRow);
        await inbox().retry([{ ...claimFor(pending), error: 'later', delayMs: 0 }]);
        await inbox().complete([claimFor(processed)]);
        await inbox().giveUp([{ ...claimFor(dead), reason: 'no' }]);
        const before = await Promise.all(ids.map(get));

        for (const id of ids) expect(sortedReport(await settle(name, claimFor(id)))).toEqual(allStale([id]));

        expect(await Promise.all(ids.map(get))).toEqual(before);
        expect(await outboxCount()).toBe(0);
      },
    );
  });

  describe('inbox duplicates', () => {
    it('storing (source, idempotency key) twice answers duplicate with the first id and keeps the first row', async () => {
      const key = unique('evt');
      const first = await inbox().store(anInboxMessage({ idempotencyKey: key, payload: { v: 1 } }));

      const second = await inbox().store(anInboxMessage({ idempotencyKey: key, payload: { v: 2 } }));
      const dead = await inbox().storeDead(anInboxMessage({ idempotencyKey: key }), 'rejected');

      expect(first.status).toBe('stored');
      expect(second).toEqual({ status: 'duplicate', id: first.id });
      expect(dead).toEqual({ status: 'duplicate', id: first.id });
      expect(await get(first.id)).toMatchObject({ state: MessageState.Pending, payload: { v: 1 } });
      expect(await current().countByState('inbox')).toEqual({ pending: 1 });
    });

    it('a dead row also answers a repeat as duplicate', async () => {
      const key = unique('evt');
      const dead = await inbox().storeDead(anInboxMessage({ idempotencyKey: key }), 'not JSON');

      const again = await inbox().store(anInboxMessage({ idempotencyKey: key }));

      expect(again).toEqual({ status: 'duplicate', id: dead.id });
      expect((await get(dead.id)).state).toBe(MessageState.Dead);
    });

    it('the same idempotency key in another source is a different message', async () => {
      const key = unique('evt');
      const a = await inbox().store(anInboxMessage({ idempotencyKey: key, source: SOURCE }));

      const b = await inbox().store(anInboxMessage({ idempotencyKey: key, source: OTHER_SOURCE }));

      expect(a.status).toBe('stored');
      expect(b.status).toBe('stored');
      expect(b.id).not.toBe(a.id);
    });

    it('50 concurrent stores of one (source, idempotency key) store exactly one row', async () => {
      const key = unique('evt');

      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          inbox().store(anInboxMessage({ idempotencyKey: key, payload: { i } })),
        ),
      );

      const stored = results.filter((r) => r.status === 'stored');
      expect(stored).toHaveLength(1);
      expect(results.filter((r) => r.status === 'duplicate')).toHaveLength(49);
      expect(new Set(results.map((r) => r.id))).toEqual(new Set([stored[0]?.id]));
      expect(await current().countByState('inbox')).toEqual({ pending: 1 });
    });

    it('concurrent stores of many messages, repeats among them, each get the answer they would get alone', async () => {
      // Prepare: 40 messages over two sources, each sent three times at once (once as storeDead), and 10 of
      // them stored before the burst.
      const keys = Array.from({ length: 20 }, () => unique('evt'));
      const pairs = keys.flatMap((key) => [SOURCE, OTHER_SOURCE].map((source) => ({ source, key })));
      const earlier = new Map<string, string>();
      for (const { source, key } of pairs.slice(0, 10)) {
        earlier.set(
          `${source}/${key}`,
          await storeNew({ source, idempotencyKey: key, payload: { earlier: true } }),
        );
      }
      // Act
      const calls = pairs.flatMap(({ source, key }) => [0, 1, 2].map((copy) => ({ source, key, copy })));
      const results = await Promise.all(
        calls.map(({ source, key, copy }) => {
          const message = anInboxMessage({ source, idempotencyKey: key, payload: { source, key, copy } });
          return copy === 2
            ? inbox().storeDead(message, 'refused by the source transform')
            : inbox().store(message);
        }),
      );
      // Assess: per pair, one stored answer (none for the earlier ones), all answers carrying the same id.
      for (const { source, key } of pairs) {
        const answers = results.filter((_, i) => calls[i]?.source === source && calls[i]?.key === key);
        const stored = answers.filter((a) => a.status === 'stored');
        const before = earlier.get(`${source}/${key}`);
        expect(stored).toHaveLength(before === undefined ? 1 : 0);
        const id = before ?? stored[0]?.id;
        expect(answers.map((a) => a.id)).toEqual([id, id, id]);
        const row = await get(id as string);
        expect(row).toMatchObject({ source, idempotencyKey: key });
        if (before !== undefined) expect(row.payload).toEqual({ earlier: true });
        else {
          // The stored row is the message whose call answered stored, as that call sent it.
          const winner = calls[results.indexOf(stored[0] as (typeof results)[number])];
          expect(row.payload).toEqual({ source, key, copy: winner?.copy });
          expect(row.state).toBe(winner?.copy === 2 ? MessageState.Dead : MessageState.Pending);
        }
      }
      const counts = await current().countByState('inbox');
      expect((counts.pending ?? 0) + (counts.dead ?? 0)).toBe(pairs.length);
    });

    it('a message the database refuses fails alone; messages stored at the same moment are kept', async () => {
      // Prepare: max_attempts must be positive (a CHECK constraint), so this one cannot be stored.
      const good = Array.from({ length: 12 }, () => anInboxMessage());
      const bad = anInboxMessage({ maxAttempts: 0 });
      // Act
      const results = await Promise.allSettled(
        [...good.slice(0, 6), bad, ...good.slice(6)].map((m) => inbox().store(m)),
      );
      // Assess
      expect(results[6]).toMatchObject({ status: 'rejected', reason: expect.any(QueueBoxError) });
      const kept = results.filter((r) => r.status === 'fulfilled').map((r) => r.value);
      expect(kept.map((r) => r.status)).toEqual(Array(12).fill('stored'));
      for (const [i, result] of kept.entries()) {
        expect(await get(result.id)).toMatchObject({ idempotencyKey: good[i]?.idempotencyKey });
      }
      expect(await current().countByState('inbox')).toEqual({ pending: 12 });
    });
  });
}
