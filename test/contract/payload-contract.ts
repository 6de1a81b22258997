import { randomBytes } from 'node:crypto';
import type { ClaimOptions, Headers, InboxRow, JsonValue, OutboxRow } from '@queuebox/core';
import { DEFERRED_PAYLOAD_BYTES, deferredPayloadBytes } from '@queuebox/outbox';
import { describe, expect, it } from 'vitest';
import {
  anInboxMessage,
  anOutboxMessage,
  type CurrentHarness,
  claimOf,
  LEASE_MS,
  present,
  unique,
} from './fixtures.ts';

function nested(depth: number): JsonValue {
  let value: JsonValue = { leaf: 'bottom', n: depth };
  for (let i = depth; i > 0; i -= 1) value = { level: i, child: value, siblings: [i, `s${i}`] };
  return value;
}

/**
 * Every kind of `JsonValue` the port accepts as a payload. A NUL character (`\u0000`) is left out on purpose:
 * PostgreSQL's JSONB cannot hold it, so it is not part of what QueueBox promises to store.
 */
export const PAYLOADS: readonly (readonly [string, JsonValue])[] = [
  ['an object', { orderId: 'o-1', total: 42, paid: true, note: null }],
  ['an empty object', {}],
  ['an array', [1, 'two', { three: 3 }, [4], null, true, false]],
  ['an empty array', []],
  ['a string', 'just a string'],
  ['an empty string', ''],
  ['a string that looks like JSON', '{"not":"an object"}'],
  ['an integer', 42],
  ['zero', 0],
  ['a negative fraction', -12.75],
  ['true', true],
  ['false', false],
  ['null', null],
  [
    'numbers at the edges',
    {
      ints: [0, 1, -1, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 1e21],
      fractions: [0.1, 0.30000000000000004, Math.PI, -2.5e-7, Number.MAX_VALUE, Number.MIN_VALUE],
    },
  ],
  [
    'unicode text and keys',
    {
      ja: '日本語のテキスト',
      emoji: '🎉👍🏽👨‍👩‍👧',
      greek: 'Ελληνικά',
      hebrew: 'עברית',
      combining: 'e\u0301',
      'clé 🔑': 'value',
    },
  ],
  [
    'characters that need escaping',
    {
      quote: 'a "quoted" word',
      backslash: 'C:\\path\\to',
      whitespace: 'line1\nline2\r\n\ttabbed',
      sql: "'; DROP TABLE outbox; --",
      markup: '<script>&amp;</script>',
      control: '\u0001\u001f',
    },
  ],
  ['a deeply nested document', nested(30)],
  ['a large document', { blob: 'x'.repeat(200_000), list: Array.from({ length: 1_000 }, (_, i) => i) }],
];

/** Registers the payload and header round-trip part of the store contract. */
export function payloadContract(current: CurrentHarness): void {
  const store = () => current().store;

  describe('payloads and headers', () => {
    it.each(PAYLOADS)('%s round-trips through insert, claim, store and forward', async (_name, payload) => {
      const [outboxId] = (await store().outbox.insert([anOutboxMessage({ payload })])) as [string];
      const stored = await store().inbox.store(anInboxMessage({ payload }));

      const fromGet = present(await store().outbox.get(outboxId));
      const [fromClaim] = (await store().outbox.claim({ batchSize: 10, leaseMs: LEASE_MS })) as [OutboxRow];
      const fromInbox = present(await store().inbox.get(stored.id));
      const [inboxClaim] = (await store().inbox.claim({
        sources: ['source-a'],
        batchSize: 10,
        leaseMs: LEASE_MS,
      })) as [InboxRow];
      const forward = await store().inbox.forward([
        { ...claimOf(inboxClaim), outbox: anOutboxMessage({ payload: inboxClaim.payload }) },
      ]);
      const forwarded = present(await store().outbox.get(forward.outboxIds[0] as string));

      expect(fromGet.payload).toStrictEqual(payload);
      expect(fromClaim.payload).toStrictEqual(payload);
      expect(fromInbox.payload).toStrictEqual(payload);
      expect(inboxClaim.payload).toStrictEqual(payload);
      expect(forwarded.payload).toStrictEqual(payload);
    });

    it("leaves a payload over the poller's deferPayloadsOverBytes out of the claim, marked with its size, and get reads it whole", async () => {
      // Prepare: random text, which PostgreSQL cannot compress (it judges a compressed payload by its stored size),
      // as a JSON string: its text is the same on every store (80,000 characters and two quotes, ASCII).
      const large = randomBytes(60_000).toString('base64');
      const small = { note: 'x'.repeat(1_000) };
      const [largeId, smallId] = (await store().outbox.insert([
        anOutboxMessage({ payload: large }),
        anOutboxMessage({ payload: small }),
      ])) as [string, string];
      // As the poller asks (not an object literal at the call, so core's ClaimOptions takes the extra field).
      const options: ClaimOptions & { readonly deferPayloadsOverBytes: number } = {
        batchSize: 10,
        leaseMs: LEASE_MS,
        deferPayloadsOverBytes: DEFERRED_PAYLOAD_BYTES,
      };

      // Act
      const claimed = await store().outbox.claim(options);
      const fromGet = present(await store().outbox.get(largeId));

      // Assess
      const largeClaim = present(claimed.find((r) => r.id === largeId));
      const smallClaim = present(claimed.find((r) => r.id === smallId));
      expect(smallClaim.payload).toStrictEqual(small);
      expect(deferredPayloadBytes(smallClaim)).toBeUndefined();
      if (current().defersLargePayloads === false) {
        expect(largeClaim.payload).toBe(large);
        expect(deferredPayloadBytes(largeClaim)).toBeUndefined();
      } else {
        expect(largeClaim.payload).toBeNull();
        expect(deferredPayloadBytes(largeClaim)).toBe(large.length + 2);
      }
      expect(fromGet.payload).toBe(large);
      expect(fromGet.claimToken).toBe(largeClaim.claimToken);
    });

    it('headers keep their names, letter case and string values', async () => {
      const headers: Headers = {
        'Content-Type': 'application/json; charset=utf-8',
        'X-Émoji': '🎉 ok',
        'x-empty': '',
        'x-json-looking': '{"a":1}',
        'x-escapes': 'a"b\\c\nd',
        'X-Correlation-Id': 'corr-日本',
      };
      const [outboxId] = (await store().outbox.insert([anOutboxMessage({ headers })])) as [string];
      const stored = await store().inbox.store(anInboxMessage({ headers }));

      const [claimed] = await store().outbox.claim({ batchSize: 10, leaseMs: LEASE_MS });
      const [inboxClaimed] = await store().inbox.claim({
        sources: ['source-a'],
        batchSize: 10,
        leaseMs: LEASE_MS,
      });

      expect(present(await store().outbox.get(outboxId)).headers).toStrictEqual(headers);
      expect(claimed?.headers).toStrictEqual(headers);
      expect(present(await store().inbox.get(stored.id)).headers).toStrictEqual(headers);
      expect(inboxClaimed?.headers).toStrictEqual(headers);
    });

    it('text columns keep unicode and hold their full declared width', async () => {
      // 'é' is one character on PostgreSQL and one UTF-16 unit on SQL Server, so the widths mean the same.
      const fill = (n: number) => 'é'.repeat(n);
      const topic = fill(400);
      const key = fill(450);
      const [outboxId] = (await store().outbox.insert([anOutboxMessage({ topic, key })])) as [string];
      const message = anInboxMessage({
        source: fill(200),
        idempotencyKey: fill(600),
        eventType: fill(400),
        aggregateId: fill(450),
        correlationId: fill(200),
      });
      const stored = await store().inbox.store(message);
      const [claimed] = (await store().outbox.claim({ batchSize: 10, leaseMs: LEASE_MS })) as [OutboxRow];
      const destination = fill(200);
      const reason = `日本語 — ${unique('reason')} 🎉`;

      await store().outbox.markDead([{ ...claimOf(claimed), reason, destination }]);

      expect(present(await store().outbox.get(outboxId))).toMatchObject({
        topic,
        key,
        destination,
        lastError: reason,
      });
      expect(present(await store().inbox.get(stored.id))).toMatchObject({
        source: message.source,
        idempotencyKey: message.idempotencyKey,
        eventType: message.eventType,
        aggregateId: message.aggregateId,
        correlationId: message.correlationId,
      });
      expect(await store().inbox.store(message)).toEqual({ status: 'duplicate', id: stored.id });
    });
  });
}
