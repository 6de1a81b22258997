/** Fencing of every outbox settle, and per-key ordering, of the store contract. */
import { MessageState, type OutboxRow } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import {
  allStale,
  anOutboxMessage,
  byId,
  type CurrentHarness,
  claimOf,
  foreignToken,
  idsOf,
  sortedReport,
  unique,
} from './fixtures.ts';
import { outboxContractKit } from './outbox-contract-kit.ts';

export function outboxFencingAndOrderingContract(current: CurrentHarness): void {
  const { outbox, claim, get, claimOne, settleNames, settle } = outboxContractKit(current);

  describe('outbox fencing', () => {
    it.each(settleNames)(
      '%s with a foreign token changes nothing and reports the row stale',
      async (name) => {
        const [id] = (await outbox().insert([anOutboxMessage()])) as [string];
        const row = await claimOne(id);
        const before = await get(id);

        const report = await settle(name, { id, claimToken: foreignToken() });

        expect(report).toEqual(allStale([id]));
        expect(await get(id)).toEqual(before);
        expect((await settle(name, claimOf(row))).settled.map((s) => s.id)).toEqual([id]);
      },
    );

    it.each(settleNames)(
      '%s with the token of an expired, reclaimed and re-claimed row is stale',
      async (name) => {
        const [id] = (await outbox().insert([anOutboxMessage()])) as [string];
        const lost = await claimOne(id);
        await current().expireLeases('outbox', [id]);
        expect(await outbox().reclaimExpired()).toEqual({ returned: 1, dead: 0 });
        const owner = await claimOne(id);
        const before = await get(id);

        const report = await settle(name, claimOf(lost));

        expect(report).toEqual(allStale([id]));
        expect(await get(id)).toEqual(before);
        expect(before).toMatchObject({ state: MessageState.Processing, claimToken: owner.claimToken });
      },
    );

    it.each(settleNames)(
      '%s of a row that is not processing (pending, sent, dead) is stale',
      async (name) => {
        const ids = await outbox().insert([anOutboxMessage(), anOutboxMessage(), anOutboxMessage()]);
        const [pending, sent, dead] = ids as [string, string, string];
        const rows = new Map((await claim()).map((r) => [r.id, r]));
        const claimFor = (id: string) => claimOf(rows.get(id) as OutboxRow);
        await outbox().release([claimFor(pending)]);
        await outbox().markSent([{ ...claimFor(sent), destination: 'billing' }]);
        await outbox().markDead([{ ...claimFor(dead), reason: 'no route' }]);
        const before = await Promise.all(ids.map(get));

        for (const id of ids) expect(await settle(name, claimFor(id))).toEqual(allStale([id]));

        expect(await Promise.all(ids.map(get))).toEqual(before);
      },
    );

    it.each(settleNames)('%s of an id that does not exist is stale', async (name) => {
      const [id] = (await outbox().insert([anOutboxMessage()])) as [string];
      const missing = (BigInt(id) + 1_000_000n).toString();

      expect(await settle(name, { id: missing, claimToken: foreignToken() })).toEqual(allStale([missing]));
    });

    it('a batch settles the rows it still holds and reports the others stale', async () => {
      const ids = await outbox().insert([anOutboxMessage(), anOutboxMessage(), anOutboxMessage()]);
      const [held, foreign, lost] = ids as [string, string, string];
      const rows = new Map((await claim()).map((r) => [r.id, r]));
      const claimFor = (id: string) => claimOf(rows.get(id) as OutboxRow);
      await outbox().release([claimFor(lost)]);
      await claim();

      const report = await outbox().markSent([
        { ...claimFor(held), destination: 'billing' },
        { id: foreign, claimToken: foreignToken(), destination: 'billing' },
        { ...claimFor(lost), destination: 'billing' },
      ]);

      expect(sortedReport(report)).toEqual({
        settled: [{ id: held, state: MessageState.Sent }],
        stale: [foreign, lost].sort(byId),
      });
      expect((await get(foreign)).state).toBe(MessageState.Processing);
      expect((await get(lost)).state).toBe(MessageState.Processing);
    });
  });

  describe('outbox ordering', () => {
    it('rows of one key come out one at a time in id order, beside other keys and unkeyed rows', async () => {
      const a = unique('key-a');
      const b = unique('key-b');
      const ids = await outbox().insert([
        anOutboxMessage({ key: a }),
        anOutboxMessage({ key: b }),
        anOutboxMessage({ key: null }),
        anOutboxMessage({ key: a }),
        anOutboxMessage(),
        anOutboxMessage({ key: b }),
        anOutboxMessage({ key: a }),
      ]);
      const [a1, b1, u1, a2, u2, b2, a3] = ids as [string, string, string, string, string, string, string];

      const rounds: string[][] = [];
      for (let round = 0; round < 5; round += 1) {
        const rows = await claim();
        rounds.push(idsOf(rows));
        if (rows.length === 0) break;
        await outbox().markSent(rows.map((r) => ({ ...claimOf(r), destination: 'billing' })));
      }

      expect(rounds).toEqual([[a1, b1, u1, u2].sort(byId), [a2, b2].sort(byId), [a3], []]);
    });

    it('a processing head holds back the rows of its key', async () => {
      const key = unique('key');
      const [head, next] = (await outbox().insert([anOutboxMessage({ key }), anOutboxMessage({ key })])) as [
        string,
        string,
      ];

      const first = await claim();
      const second = await claim();

      expect(idsOf(first)).toEqual([head]);
      expect(second).toEqual([]);
      expect((await get(next)).state).toBe(MessageState.Pending);
    });

    it('a retrying head holds back its key while other keys and unkeyed rows flow; dead lets the next go', async () => {
      const a = unique('key-a');
      const b = unique('key-b');
      const ids = await outbox().insert([
        anOutboxMessage({ key: a }),
        anOutboxMessage({ key: a }),
        anOutboxMessage({ key: b }),
        anOutboxMessage(),
      ]);
      const [a1, a2, b1, u1] = ids as [string, string, string, string];
      const round1 = new Map((await claim()).map((r) => [r.id, r]));
      expect([...round1.keys()].sort(byId)).toEqual([a1, b1, u1]);
      await outbox().retry([{ ...claimOf(round1.get(a1) as OutboxRow), error: 'HTTP 503', delayMs: 60_000 }]);
      await outbox().markSent([
        { ...claimOf(round1.get(b1) as OutboxRow), destination: 'billing' },
        { ...claimOf(round1.get(u1) as OutboxRow), destination: 'billing' },
      ]);
      const [b2, u2] = (await outbox().insert([anOutboxMessage({ key: b }), anOutboxMessage()])) as [
        string,
        string,
      ];

      const round2 = await claim();
      expect(idsOf(round2)).toEqual([b2, u2].sort(byId));

      await current().makeDue('outbox', [a1]);
      const round3 = await claim();
      expect(idsOf(round3)).toEqual([a1]);

      await outbox().markDead([{ ...claimOf(round3[0] as OutboxRow), reason: 'gave up' }]);
      expect(idsOf(await claim())).toEqual([a2]);
    });

    it('a head not yet due still holds back its key', async () => {
      const key = unique('key');
      await outbox().insert([anOutboxMessage({ key, delayMs: 60_000 })]);
      const [due] = (await outbox().insert([anOutboxMessage({ key })])) as [string];

      expect(await claim()).toEqual([]);
      expect((await get(due)).state).toBe(MessageState.Pending);
    });

    it('a released or reclaimed head keeps its place before the rows behind it', async () => {
      const key = unique('key');
      const [head] = (await outbox().insert([anOutboxMessage({ key }), anOutboxMessage({ key })])) as [
        string,
      ];
      const first = await claimOne(head);

      await outbox().release([claimOf(first)]);
      const second = await claim();
      expect(idsOf(second)).toEqual([head]);

      await current().expireLeases('outbox', [head]);
      await outbox().reclaimExpired();
      expect(idsOf(await claim())).toEqual([head]);
    });

    it('a row with an unknown state literal does not hold back its key', async () => {
      const key = unique('key');
      const [archived, next] = (await outbox().insert([
        anOutboxMessage({ key }),
        anOutboxMessage({ key }),
      ])) as [string, string];
      await current().setStateLiteral('outbox', archived, 'archived');

      expect(idsOf(await claim())).toEqual([next]);
    });
  });
}
