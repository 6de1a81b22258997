/** Ingestion on a real PostgreSQL store: the second round of hostile input (issue 13). */
import { createHash, createHmac, randomUUID } from 'node:crypto';
import { useTestStore } from '@queuebox/testing';
import { describe, expect, it } from 'vitest';
import type { IngestRequest, Sources } from '../src/index.ts';
import { createIngestion, createRelay } from '../src/index.ts';
import { clock, NOW } from './ingest-fixtures.ts';

const db = useTestStore('inbox_ingest_hostile', { storePoolSize: 10 });

describe('hostile input, second round (issue 13)', () => {
  const SW_SECRET = `whsec_${Buffer.from('twenty-four bytes of key!').toString('base64')}`;
  const HOOK_SECRET = 'gh-body-hash-secret';
  const second: Sources = {
    sw: { type: 'http', auth: { scheme: 'standard-webhooks', secrets: [SW_SECRET] } },
    svix: { type: 'http', auth: { scheme: 'svix', secrets: [SW_SECRET] } },
    ghb: {
      type: 'http',
      auth: { scheme: 'github', secrets: [HOOK_SECRET] },
      idempotencyKey: { bodyHash: true },
      topic: 'github.{{ eventType }}',
    },
    big: { type: 'http', idempotencyKey: { path: '$.id' }, eventTypePath: '$.type' },
    open: { type: 'http', eventTypePath: '$.type', topic: 'open.{{ eventType }}' },
    pulled: { type: 'http', mode: 'pull', eventTypePath: '$.type', topic: 'p.{{ eventType }}' },
    kept: { type: 'http', eventTypePath: '$.type', keepHeaders: ['X-Keep', 'X-Auth-Token'] },
  };
  const service = () =>
    createIngestion({ store: db.store.inbox, sources: second, inbox: { basePath: '/inbox' }, clock });
  const json = { 'content-type': 'application/json' };
  const post = (path: string, text: string, headers: Record<string, string> = json): IngestRequest => ({
    method: 'POST',
    path,
    headers,
    body: new TextEncoder().encode(text),
  });
  const svixSigned = (text: string, id: string) => {
    const t = Math.floor(NOW / 1000);
    const key = Buffer.from(SW_SECRET.slice('whsec_'.length), 'base64');
    const signature = createHmac('sha256', key).update(`${id}.${t}.${text}`).digest('base64');
    return { ...json, 'svix-id': id, 'svix-timestamp': String(t), 'svix-signature': `v1,${signature}` };
  };

  it('keys a Standard Webhooks message by the signed id: unsigned webhook-id headers cannot re-key a replay', async () => {
    const text = JSON.stringify({ type: 'invoice.paid', n: 1 });
    const id = `msg_${randomUUID()}`;
    const headers = svixSigned(text, id);
    const first = await service().handle(post('/inbox/sw', text, headers));
    const replays = [];
    for (const forged of ['r1', 'r2']) {
      replays.push(await service().handle(post('/inbox/sw', text, { ...headers, 'webhook-id': forged })));
    }
    const again = await service().handle(post('/inbox/sw', text, headers));
    expect(first.status).toBe(202);
    expect(replays.map((r) => r.status)).toEqual([401, 401]);
    expect(again).toMatchObject({ status: 200, body: { status: 'duplicate' } });
    expect((await db.inboxRows('sw')).filter((r) => r.payload !== null).map((r) => r.idempotencyKey)).toEqual(
      [id],
    );
    // `scheme: svix` is the same scheme under its documented alias.
    expect((await service().handle(post('/inbox/svix', text, headers))).status).toBe(202);
  });

  it('with idempotencyKey { bodyHash: true }, a captured GitHub delivery re-sent with a new delivery id and event is a duplicate', async () => {
    const text = JSON.stringify({ action: 'opened', number: randomUUID() });
    const signature = `sha256=${createHmac('sha256', HOOK_SECRET).update(text).digest('hex')}`;
    const delivery = (id: string, event: string) =>
      post('/inbox/ghb', text, {
        ...json,
        'x-github-delivery': id,
        'x-github-event': event,
        'x-hub-signature-256': signature,
      });
    const first = await service().handle(delivery(randomUUID(), 'pull_request'));
    const replay = await service().handle(delivery(randomUUID(), 'deployment'));
    expect(first.status).toBe(202);
    expect(replay).toMatchObject({ status: 200, body: { status: 'duplicate' } });
    const key = `sha256:${createHash('sha256').update(text).digest('hex')}`;
    expect(await db.countInbox('ghb', key)).toBe(1);
    const rows = (await db.inboxRows('ghb')).filter((r) => r.idempotencyKey === key);
    expect(rows.map((r) => r.eventType)).toEqual(['pull_request']);
  });

  it('keeps the source text of numbers beyond 2^53 in keys and payloads, through the store and the relay', async () => {
    const a = await service().handle(post('/inbox/big', '{"id": 9007199254740993, "type": "big.a"}'));
    const b = await service().handle(post('/inbox/big', '{"id": 9007199254740992, "type": "big.b"}'));
    const c = await service().handle(
      post('/inbox/big', '{"id": "c-1", "type": "big.c", "amount": 1234567890123456789, "ratio": 0.1}'),
    );
    expect([a.status, b.status, c.status]).toEqual([202, 202, 202]);
    expect(await db.countInbox('big', '9007199254740993')).toBe(1);
    expect(await db.countInbox('big', '9007199254740992')).toBe(1);
    const row = await db.store.inbox.get(c.body.id as string);
    expect(JSON.stringify(row?.payload)).toContain('"amount":1234567890123456789');
    expect(JSON.stringify(row?.payload)).toContain('"ratio":0.1');
    const relay = createRelay({ store: db.store.inbox, sources: second });
    const report = await relay.drain({ deadline: Date.now() + 20_000 });
    const forwarded = await Promise.all(report.outboxIds.map((id) => db.store.outbox.get(id)));
    const outbox = forwarded.find((r) => r?.topic === 'big.c');
    expect(JSON.stringify(outbox?.payload)).toContain('"amount":1234567890123456789');
  });

  it('answers 400 invalid_json to a number beyond what jsonb holds (not a 500 the sender retries for ever)', async () => {
    for (const n of ['1e1000000', '1e-16384', '-2.5e131072']) {
      const answer = await service().handle(
        post('/inbox/big', `{"id": "range-${n}", "type": "t", "n": ${n}}`),
      );
      expect([n, answer.status, answer.body.error]).toEqual([n, 400, 'invalid_json']);
    }
    const widest = await service().handle(
      post('/inbox/big', '{"id": "range-ok", "type": "t", "n": 1e131071}'),
    );
    expect(widest.status).toBe(202);
  });

  it('answers 400 invalid_json to a small body whose numbers the database would print as hundreds of megabytes, and stores nothing', async () => {
    // 4,200 numbers of 1e131071: 38 KB as sent, 550 MB as PostgreSQL prints it at every read; stored, the claims of its
    // relayed outbox row crashed the process again after every lease (outside audit of encodings).
    const numbers = Array.from({ length: 4_200 }, () => '1e131071').join(',');
    const answer = await service().handle(
      post('/inbox/big', `{"id": "amplified", "type": "t", "n": [${numbers}]}`),
    );
    expect([answer.status, answer.body.error]).toEqual([400, 'invalid_json']);
    expect(String(answer.body.message)).toMatch(/written out in full/);
    expect((await db.inboxRows('big')).filter((r) => r.idempotencyKey === 'amplified')).toEqual([]);
  });

  it('answers 400 invalid_json to a number in range written with a scale PostgreSQL refuses, and stores the ones it takes', async () => {
    // PostgreSQL reads the scale from the text, trailing zeros included: 1.0e-16383 is 10^-16383 (storable as 1e-16383)
    // written with 16384 digits after the point, and the insert failed with "value overflows numeric format": a 500
    // on every retry of the sender.
    const refused = ['1.0e-16383', '100e-16385', '0.10e-16382', '-1.000e-16381'];
    const taken = ['1e-16383', '0.1e-16382', '1.000e131071', '-123e-16381'];
    for (const n of refused) {
      const answer = await service().handle(
        post('/inbox/big', `{"id": "scale-${n}", "type": "t", "n": ${n}}`),
      );
      expect([n, answer.status, answer.body.error]).toEqual([n, 400, 'invalid_json']);
      expect(answer.body.message).toMatch(/more than 16383 digits after the decimal point/);
      expect(await db.countInbox('big', `scale-${n}`)).toBe(0);
    }
    for (const n of taken) {
      const answer = await service().handle(
        post('/inbox/big', `{"id": "scale-${n}", "type": "t", "n": ${n}}`),
      );
      expect([n, answer.status]).toEqual([n, 202]);
      const stored = await db.store.inbox.get(answer.body.id as string);
      expect(JSON.stringify(stored?.payload)).toContain('"n":');
    }
  });

  it('stores a header name or value no store keeps (U+0000, an unpaired surrogate) as base64:, once, instead of a 500', async () => {
    // Node's HTTP parser refuses such headers; an API Gateway event or a library caller hands them over as they are.
    const headers = {
      ...json,
      'idempotency-key': 'poison-headers',
      'x-nul': 'a\u0000b',
      'x-lone': 'a\ud800b',
      'x-\u0000name': 'v',
      'x-plain': 'kept as it is',
    };
    const text = JSON.stringify({ type: 'h' });
    const first = await service().handle(post('/inbox/open', text, headers));
    const again = await service().handle(post('/inbox/open', text, headers));
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    expect(again).toMatchObject({ status: 200, body: { status: 'duplicate' } });
    expect(await db.countInbox('open', 'poison-headers')).toBe(1);
    const stored = await db.store.inbox.get(first.body.id as string);
    expect(stored?.headers).toEqual({
      'x-nul': `base64:${Buffer.from('a\u0000b').toString('base64')}`,
      // An unpaired surrogate has no UTF-8 bytes: it counts as U+FFFD, as for the broker sources.
      'x-lone': `base64:${Buffer.from('a\ufffdb').toString('base64')}`,
      [`base64:${Buffer.from('x-\u0000name').toString('base64')}`]: 'v',
      'x-plain': 'kept as it is',
      'idempotency-key': 'poison-headers',
    });
    // A key or an event type read from such a header is refused, never re-encoded: it would be another key.
    const keyed = await service().handle(
      post('/inbox/open', text, { ...json, 'idempotency-key': 'poison\u0000key' }),
    );
    expect(keyed).toMatchObject({ status: 400, body: { error: 'invalid_idempotency_key' } });
  });

  it('answers 400 invalid_topic, storing nothing, when the topic would be too long for the outbox', async () => {
    const type = 't'.repeat(399);
    // One service throughout: the second request of each event type gets the verdict the first one left.
    const ingestion = service();
    for (const key of ['long-topic', 'long-topic-again']) {
      const answer = await ingestion.handle(
        post('/inbox/open', JSON.stringify({ type }), { ...json, 'idempotency-key': key }),
      );
      expect(answer).toMatchObject({ status: 400, body: { error: 'invalid_topic' } });
      expect(await db.countInbox('open', key)).toBe(0);
    }
    // A pull source's topic is never rendered; the longest event type whose topic fits still goes in.
    for (const key of ['fits', 'fits-again']) {
      const fits = await ingestion.handle(
        post('/inbox/open', JSON.stringify({ type: 't'.repeat(395) }), { ...json, 'idempotency-key': key }),
      );
      expect(fits.status).toBe(202);
    }
    const pulled = await service().handle(
      post('/inbox/pulled', JSON.stringify({ type }), { ...json, 'idempotency-key': 'pulled' }),
    );
    expect(pulled.status).toBe(202);
  });

  it('stores only the headers a source keeps (keepHeaders), and never a credential header even when listed', async () => {
    const answer = await service().handle(
      post('/inbox/kept', JSON.stringify({ type: 'k' }), {
        ...json,
        'idempotency-key': 'kept-1',
        'x-keep': 'yes',
        'x-other': 'no',
        'x-auth-token': 'secret-token',
        'x-forwarded-for': '10.0.0.1',
      }),
    );
    expect(answer.status).toBe(202);
    expect((await db.store.inbox.get(answer.body.id as string))?.headers).toEqual({ 'x-keep': 'yes' });
  });

  it('answers 415 to a body without a JSON Content-Type (a browser posting cross-site), and takes +json types', async () => {
    const text = JSON.stringify({ type: 'csrf' });
    for (const type of [
      undefined,
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'text/html; charset=iso-8859-1',
    ]) {
      const headers: Record<string, string> = { 'idempotency-key': `ct-${type}` };
      if (type !== undefined) headers['content-type'] = type;
      const answer = await service().handle(post('/inbox/open', text, headers));
      expect([type, answer.status, answer.body.error]).toEqual([type, 415, 'unsupported_media_type']);
      expect(await db.countInbox('open', `ct-${type}`)).toBe(0);
    }
    for (const type of [
      'application/json; charset=utf-8',
      'Application/JSON',
      'application/cloudevents+json',
    ]) {
      const answer = await service().handle(
        post('/inbox/open', text, { 'content-type': type, 'idempotency-key': `ok-${type}` }),
      );
      expect([type, answer.status]).toEqual([type, 202]);
    }
  });

  it('answers 415 to a body whose declared charset would read its bytes as other text than UTF-8 does, and stores nothing', async () => {
    // Prepare: the bytes C3 A9 are `é` in UTF-8 and `Ã©` in Latin-1; UTF-16 text is never UTF-8.
    const latin = new Uint8Array([
      ...new TextEncoder().encode('{"type":"t","name":"'),
      0xc3,
      0xa9,
      0x22,
      0x7d,
    ]);
    const utf16 = new Uint8Array(Buffer.from('{"type":"t"}', 'utf16le'));
    const refused: [string, Uint8Array][] = [
      ['application/json; charset=iso-8859-1', latin],
      ['application/json; charset="windows-1252"', latin],
      ['application/json; charset=us-ascii', latin],
      ['application/json; charset=UTF-16LE', utf16],
      ['application/json; charset=utf-16', new TextEncoder().encode('{"type":"t"}')],
      // UTF-7 reads these ASCII bytes as `café` (outside audit); an unknown label promises nothing either.
      ['application/json; charset=utf-7', new TextEncoder().encode('{"type":"t","name":"caf+AOk-"}')],
      ['application/json; charset=x-no-such', new TextEncoder().encode('{"type":"t"}')],
    ];
    for (const [type, body] of refused) {
      const key = `cs-${type}`;
      const answer = await service().handle({
        method: 'POST',
        path: '/inbox/open',
        headers: { 'content-type': type, 'idempotency-key': key },
        body,
      });
      expect([type, answer.status, answer.body.error]).toEqual([type, 415, 'unsupported_media_type']);
      expect(String(answer.body.message)).toMatch(/charset=.*UTF-8/);
      expect(await db.countInbox('open', key)).toBe(0);
    }
    // ASCII reads the same in every ASCII-based charset, and UTF-8 may say so.
    for (const [type, body] of [
      ['application/json; charset=iso-8859-1', new TextEncoder().encode('{"type":"t","name":"e"}')],
      ['application/json; charset=UTF-8', latin],
      ['application/json;charset=utf8', latin],
      ['application/json; charset=utf_8', latin],
      ['application/json; charset=windows-1252', new TextEncoder().encode('{"type":"t","name":"w"}')],
    ] as const) {
      const answer = await service().handle({
        method: 'POST',
        path: '/inbox/open',
        headers: { 'content-type': type, 'idempotency-key': `cs-ok-${type}` },
        body,
      });
      expect([type, answer.status]).toEqual([type, 202]);
    }
  });

  it('answers 415 to a compressed body (signatures cover the bytes as sent), and takes identity', async () => {
    // Prepare: a gzip body whose HMAC covers its JSON, as a sender compressing after signing would send it.
    const text = JSON.stringify({ type: 'zipped' });
    const { gzipSync } = await import('node:zlib');
    const zipped = gzipSync(text);
    // Act
    const answers = [];
    for (const coding of ['gzip', 'br', 'GZIP', 'deflate, gzip']) {
      answers.push(
        await service().handle({
          method: 'POST',
          path: '/inbox/open',
          headers: { ...json, 'content-encoding': coding, 'idempotency-key': `ce-${coding}` },
          body: new Uint8Array(zipped),
        }),
      );
    }
    const identity = await service().handle(
      post('/inbox/open', text, {
        ...json,
        'content-encoding': 'identity',
        'idempotency-key': 'ce-identity',
      }),
    );
    // Assess
    for (const answer of answers) {
      expect(answer).toMatchObject({ status: 415, body: { error: 'unsupported_media_type' } });
      expect(answer.body.message).toMatch(/Content-Encoding/);
      expect(answer.headers['accept-encoding']).toBe('identity');
    }
    for (const coding of ['gzip', 'br', 'GZIP', 'deflate, gzip'])
      expect(await db.countInbox('open', `ce-${coding}`)).toBe(0);
    expect(identity.status).toBe(202);
  });

  it('answers 415 to a body sent with a transfer coding other than chunked (Node hands its bytes over undecoded)', async () => {
    // Prepare: what Node's server hands over for `Transfer-Encoding: gzip, chunked`: the gzip bytes, unchunked.
    const text = JSON.stringify({ type: 'te' });
    const { gzipSync } = await import('node:zlib');
    const zipped = new Uint8Array(gzipSync(text));
    // Act
    const answers = [];
    for (const coding of ['gzip, chunked', 'deflate,chunked', 'x-custom, chunked', 'GZIP , Chunked']) {
      answers.push([
        coding,
        await service().handle({
          method: 'POST',
          path: '/inbox/open',
          headers: { ...json, 'transfer-encoding': coding, 'idempotency-key': `te-${coding}` },
          body: zipped,
        }),
      ] as const);
    }
    const chunked = await service().handle(
      post('/inbox/open', text, { ...json, 'transfer-encoding': 'Chunked', 'idempotency-key': 'te-chunked' }),
    );
    // Assess
    for (const [coding, answer] of answers) {
      expect([coding, answer.status, answer.body.error]).toEqual([coding, 415, 'unsupported_media_type']);
      expect(answer.body.message).toMatch(/transfer coding/);
      expect(await db.countInbox('open', `te-${coding}`)).toBe(0);
    }
    expect(chunked.status).toBe(202);
  });
});
