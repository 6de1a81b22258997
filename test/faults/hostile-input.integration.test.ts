/**
 * Hostile input at the inbox of a running runtime (a real process on PostgreSQL), with seeded fuzzing so a failure
 * reproduces (`QUEUEBOX_FUZZ_SEED` replays a seed): forged and garbled credentials on every authentication scheme,
 * bodies that are not UTF-8 or not JSON, generated JSON messages (stored exactly as sent, or refused with 400),
 * JSON PostgreSQL cannot store, bodies over the limit, header injection at the socket level, SQL metacharacters in
 * every field and in the source path, spoofed relay headers, wrong methods and paths, and the admin API's
 * credentials. The server answers a clear 4xx, stores only what it accepted (exactly as sent), never crashes, and
 * no configured secret shows up in its logs or answers.
 *
 * Signature timing is not measured here (no timed assertions in tests): bench/soak.ts measures it.
 */
import { randomBytes } from 'node:crypto';
import { requireServices } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import { streamChunked } from './support/wire.ts';

const needs = await requireServices('faults: hostile input', ['postgres']);

import { assessHostileRuntime, MAX_BODY_BYTES, useHostileRuntime } from './hostile-runtime.ts';
import { aJsonValue, next, PRINTABLE, pick, text } from './support/fuzz.ts';
import { AUTH_HEADERS, credentials, nowSeconds, SOURCES, TIMED } from './support/signers.ts';

describe.skipIf(needs.skipReason)(
  'hostile input at the inbox of a running runtime: credentials and bodies',
  () => {
    const h = useHostileRuntime(needs.url.postgres);
    const { secrets, answers, taken, tried, post, raw, send, rowFor, inboxRows } = h;

    it('accepts a correctly signed message on every scheme (so the refusals below mean something)', async () => {
      for (const source of SOURCES) {
        const answer = await send('valid', source, {
          id: `ok-${source}`,
          type: 'fuzz.ok',
          agg: 'a-1',
          corr: 'c-1',
        });
        expect(answer.status, `${source}: ${answer.body}`).toBe(202);
      }
    });

    it('answers 401 to forged, garbled, replayed and missing credentials on every scheme, and stores nothing', async () => {
      const before = (await inboxRows()).length;
      const statuses: Record<string, number> = {};
      for (const source of SOURCES) {
        for (let i = 0; i < 40; i += 1) {
          const id = `forged-${source}-${i}`;
          const body = Buffer.from(
            JSON.stringify({ id, type: 'fuzz.forged', agg: 'x', n: text(10, PRINTABLE) }),
          );
          let headers: Record<string, string>;
          const strategy = Math.floor(next() * (TIMED.has(source) ? 6 : 5));
          if (strategy === 0) headers = {};
          else if (strategy === 1) {
            headers = {};
            for (const name of AUTH_HEADERS) {
              if (next() < 0.6) headers[name] = text(60, `${PRINTABLE}=,v1t0BearerBasic`).trim() || 'x';
            }
          } else if (strategy === 2) {
            // A secret of the right shape that is not the source's (appending to a base64 secret could decode to
            // the same key).
            const wrong =
              source === 'basic'
                ? `fuzz-user:${text(12, PRINTABLE)}`
                : `${(secrets[source] as string).startsWith('whsec_') ? 'whsec_' : ''}${randomBytes(24).toString('base64')}`;
            headers = credentials(source, body, wrong);
          } else if (strategy === 3) {
            // Signed for another body: one byte of the sent body differs.
            const signed = Buffer.from(body);
            signed[signed.length - 3] = (signed[signed.length - 3] ?? 0) ^ 1;
            headers = credentials(source, signed, secrets[source] as string);
            if (source === 'bearer' || source === 'basic') {
              headers = credentials(source, body, `${(secrets[source] as string).slice(0, -1)}`);
            }
          } else if (strategy === 4) {
            // The right signature with one character of its first half changed (base64 padding and the unused
            // bits of a last character may legally vary, so the change stays away from the end).
            headers = credentials(source, body, secrets[source] as string);
            for (const name of Object.keys(headers)) {
              if (name.endsWith('id') || name.endsWith('timestamp')) continue;
              const value = headers[name] as string;
              const start = Math.max(
                value.lastIndexOf(',') + 1,
                value.lastIndexOf('=', value.length - 3) + 1,
                value.indexOf(' ') + 1,
              );
              const at = start + Math.floor(next() * ((value.length - start) / 2));
              // '0' is a digit in hex and in base64, and differs from every other character in both.
              const replacement = value[at] === '0' ? '1' : '0';
              headers[name] = `${value.slice(0, at)}${replacement}${value.slice(at + 1)}`;
            }
          } else {
            // A replay: a valid signature over a timestamp an hour old.
            headers = credentials(source, body, secrets[source] as string, nowSeconds() - 3600);
          }
          if (source === 'bearer') headers['idempotency-key'] = id;
          const answer = await post('credentials', `/inbox/${source}`, body, headers);
          statuses[answer.status ?? 0] = (statuses[answer.status ?? 0] ?? 0) + 1;
          expect(answer.status, `${source} strategy ${strategy}: ${answer.body}`).toBe(401);
          expect(JSON.parse(answer.body)).toMatchObject({ error: 'unauthorized' });
        }
      }
      expect((await inboxRows()).length).toBe(before);
      expect(statuses).toEqual({ 401: SOURCES.length * 40 });
    });

    it('answers 400 to signed bodies that are not UTF-8 JSON or carry no usable idempotency key', async () => {
      const before = (await inboxRows()).length;
      const invalidUtf8 = [
        [0xff],
        [0xc0, 0xaf],
        [0xe0, 0x80, 0x80],
        [0xed, 0xa0, 0x80],
        [0xf8, 0x88, 0x80, 0x80, 0x80],
        [0xe2, 0x82],
        [0x80],
        [0xf4, 0x90, 0x80, 0x80],
      ];
      const cases: { body: Buffer; error: string }[] = [];
      for (let i = 0; i < 60; i += 1) {
        const bad = Buffer.from(pick(invalidUtf8));
        const json = Buffer.from(
          JSON.stringify({ id: `utf8-${i}`, type: 'fuzz.utf8', v: text(10, PRINTABLE) }),
        );
        const at = 1 + Math.floor(next() * (json.length - 2));
        cases.push({
          body: Buffer.concat([json.subarray(0, at), bad, json.subarray(at)]),
          error: 'invalid_json',
        });
      }
      for (const t of [
        '',
        '{',
        '[1,',
        "{'id':'x'}",
        'NaN',
        '{"id":"x"}}',
        '{"id":"x",}',
        'undefined',
        '\u0000',
      ]) {
        cases.push({ body: Buffer.from(t), error: 'invalid_json' });
      }
      for (let i = 0; i < 30; i += 1) {
        cases.push({ body: Buffer.from(`${text(30, PRINTABLE)}{`), error: 'invalid_json' });
      }
      for (const id of [undefined, null, '', {}, [], true, ['a']]) {
        const error =
          id === undefined || id === null || id === ''
            ? 'missing_idempotency_key'
            : 'invalid_idempotency_key';
        cases.push({ body: Buffer.from(JSON.stringify({ id, type: 'fuzz.nokey' })), error });
      }
      for (const top of ['123', '"text"', '[]', 'null', 'true'])
        cases.push({ body: Buffer.from(top), error: 'missing_idempotency_key' });
      cases.push({
        body: Buffer.from(JSON.stringify({ id: 'k'.repeat(601), type: 't' })),
        error: 'invalid_idempotency_key',
      });
      cases.push({
        body: Buffer.from(JSON.stringify({ id: 'long-type', type: 't'.repeat(401) })),
        error: 'invalid_field',
      });
      cases.push({
        body: Buffer.from(JSON.stringify({ id: 'long-agg', type: 't', agg: 'a'.repeat(451) })),
        error: 'invalid_field',
      });
      for (const { body, error } of cases) {
        const answer = await post('bodies', '/inbox/hm', body, credentials('hm', body, secrets.hm as string));
        expect(answer.status, `${body.toString('latin1').slice(0, 80)} → ${answer.body}`).toBe(400);
        expect(JSON.parse(answer.body), body.toString('latin1').slice(0, 80)).toMatchObject({ error });
      }
      expect((await inboxRows()).length).toBe(before);
    });

    it('stores generated JSON messages exactly as sent, or refuses them with 400 when the key is unusable', async () => {
      let stored = 0;
      let refused = 0;
      for (let i = 0; i < 200; i += 1) {
        const message: Record<string, unknown> = {
          type: `fuzz.gen${i % 7}`,
          agg: `g${i % 13}`,
          data: aJsonValue(0),
        };
        const roll = next();
        if (roll < 0.75) message.id = `gen-${i}-${text(12, PRINTABLE)}`;
        else if (roll < 0.85) message.id = Math.floor(next() * 1e9) + i * 1e9;
        else if (roll < 0.95) message.id = aJsonValue(3);
        const source = pick(['hm', 'stripe', 'github', 'shopify', 'slack', 'basic'] as const);
        const answer = await send('generated', source, message as never);
        const id = message.id;
        const usable =
          (typeof id === 'string' && id !== '' && id.length <= 600) ||
          (typeof id === 'number' && Number.isFinite(id));
        if (usable) {
          expect(answer.status, answer.body).toBe(202);
          const row = await rowFor(source, String(id));
          expect(row?.payload).toEqual(message);
          expect(row?.event_type).toBe(message.type);
          expect(row?.aggregate_id).toBe(message.agg);
          stored += 1;
        } else {
          expect(answer.status, `${JSON.stringify(id)} → ${answer.body}`).toBe(400);
          refused += 1;
        }
      }
      expect(stored).toBeGreaterThan(100);
      expect(refused).toBeGreaterThan(10);
    });

    it('answers a clear 4xx (not 500) to JSON that PostgreSQL cannot store: deep nesting, U+0000, lone surrogates', async () => {
      const before = (await inboxRows()).length;
      const cases = [
        [
          '100,000 nested arrays',
          `{"id":"deep-array","type":"t","x":${'['.repeat(100_000)}${']'.repeat(100_000)}}`,
        ],
        [
          '10,000 nested objects',
          `{"id":"deep-object","type":"t","x":${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}}`,
        ],
        ['U+0000 in the payload', '{"id":"nul-payload","type":"t","x":"a\\u0000b"}'],
        ['U+0000 in the idempotency key', '{"id":"nul\\u0000key","type":"t"}'],
        ['U+0000 in the event type', '{"id":"nul-type","type":"t\\u0000"}'],
        ['a lone high surrogate in the payload', '{"id":"surrogate-payload","type":"t","x":"\\ud800"}'],
        ['a lone low surrogate in the key', '{"id":"surrogate\\udc00key","type":"t"}'],
      ] as const;
      const notClear: string[] = [];
      for (const [what, text] of cases) {
        const body = Buffer.from(text);
        const answer = await post(
          'unstorable',
          '/inbox/hm',
          body,
          credentials('hm', body, secrets.hm as string),
        );
        if (answer.status === undefined || answer.status < 400 || answer.status >= 500) {
          notClear.push(`${what}: ${answer.status} ${answer.body}`);
        }
      }
      expect((await inboxRows()).length).toBe(before);
      expect((await fetch(`${h.base}/health`)).status).toBe(200);
      expect(notClear).toEqual([]);
    });

    it('refuses bodies over inbox.maxBodyBytes with 413 (by Content-Length or while streaming) and takes one of exactly the limit', async () => {
      const padding = (size: number, id: string) => {
        const head = `{"id":"${id}","type":"fuzz.size","pad":"`;
        return Buffer.from(`${head}${'p'.repeat(size - head.length - 2)}"}`);
      };
      const exact = padding(MAX_BODY_BYTES, 'size-exact');
      expect(exact.length).toBe(MAX_BODY_BYTES);
      const fits = await post('size', '/inbox/hm', exact, credentials('hm', exact, secrets.hm as string));
      expect(fits.status, fits.body).toBe(202);
      taken.set(`hm\u0001size-exact`, {
        source: 'hm',
        idempotencyKey: 'size-exact',
        eventType: 'fuzz.size',
        aggregateId: null,
        correlationId: null,
        payload: JSON.parse(exact.toString()),
        id: (JSON.parse(fits.body) as { id: string }).id,
      });
      const over = padding(MAX_BODY_BYTES + 1, 'size-over');
      const tooLarge = await post('size', '/inbox/hm', over, credentials('hm', over, secrets.hm as string));
      expect(tooLarge.status).toBe(413);
      expect(JSON.parse(tooLarge.body)).toMatchObject({ error: 'payload_too_large' });
      // A claimed length of 10 GB is refused before a byte of body is sent.
      const claimed = await raw(
        'size',
        `POST /inbox/hm HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n`,
      );
      expect(claimed.status).toBe(413);
      // 8 MiB streamed in chunks without a length: the server stops reading once the limit passes and closes the
      // connection. It answers 413 first, but closing with unread bytes makes the kernel send a reset, which may
      // discard that answer before the client reads it (no lingering close): either is accepted, a full read is not.
      const streamed = await streamChunked(h.port, '/inbox/hm', 8 * 1024 * 1024);
      tried.size = (tried.size ?? 0) + 1;
      answers.push({ category: 'size', status: streamed.status, body: '' });
      expect(
        streamed.status === 413 || (streamed.status === undefined && streamed.cutShort),
        JSON.stringify(streamed),
      ).toBe(true);
      console.info(
        `[faults: hostile input] 8 MiB chunked body: ${streamed.status === 413 ? 'answered 413' : 'connection reset before the 413 was read'} after ${streamed.written} bytes written`,
      );
      for (const length of ['-1', 'abc', '1, 2']) {
        const answer = await raw(
          'size',
          `POST /inbox/hm HTTP/1.1\r\nHost: x\r\nContent-Length: ${length}\r\n\r\n{}`,
        );
        expect(answer.status, `Content-Length: ${length}`).toBe(400);
      }
      expect(await rowFor('hm', 'size-over')).toBeUndefined();
    });

    it('is still the same healthy process, holds exactly the accepted rows, and never showed a secret', async () => {
      await assessHostileRuntime(h, 'faults: hostile input');
    });
  },
);
