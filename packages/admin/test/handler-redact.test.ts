/**
 * `POST /admin/<table>/:id/redact` on a scripted store: what each answer of `AdminStore.redact` becomes over HTTP.
 * The real stores are in handler.postgres.integration.test.ts and the store contract.
 */
import type { RedactResult, RowId, Store, Table } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { createAdminHandler } from '../src/handler.ts';

const TOKEN = 'admin-token-0123456789';

/** A store whose redact answers `result`, recording its calls; anything else fails the request. */
function redactingStore(result: RedactResult) {
  const calls: [Table, RowId][] = [];
  const store = {
    admin: {
      redact: async (table: Table, id: RowId) => {
        calls.push([table, id]);
        return result;
      },
    },
  } as unknown as Pick<Store, 'admin' | 'outbox' | 'inbox'>;
  return { store, calls };
}

const post = (path: string, headers = { authorization: `Bearer ${TOKEN}` }) => ({
  method: 'POST',
  path,
  headers,
});

describe('POST /admin/:table/:id/redact', () => {
  it('answers 200 {status: "redacted", id} for an outbox row', async () => {
    const { store, calls } = redactingStore({ status: 'redacted' });

    const answer = await createAdminHandler({ store, token: TOKEN }).handle(post('/admin/outbox/41/redact'));

    expect(calls).toEqual([['outbox', '41']]);
    expect(answer).toEqual({ status: 200, body: { status: 'redacted', id: '41' } });
  });

  it('answers an inbox redact with a note: the outbox rows forwarded from it are not changed', async () => {
    const { store, calls } = redactingStore({ status: 'redacted' });

    const answer = await createAdminHandler({ store, token: TOKEN }).handle(post('/admin/inbox/7/redact'));

    expect(calls).toEqual([['inbox', '7']]);
    expect(answer).toEqual({
      status: 200,
      body: {
        status: 'redacted',
        id: '7',
        note: 'Outbox rows the relay forwarded from inbox row 7 (header x-inbox-id: 7) hold their own copy of its payload and headers and were not changed: find them and redact each (see @queuebox/admin, "Redact")',
      },
    });
  });

  it('answers 404 row_not_found for a row that does not exist', async () => {
    const { store } = redactingStore({ status: 'not_found' });

    const answer = await createAdminHandler({ store, token: TOKEN }).handle(post('/admin/inbox/9/redact'));

    expect(answer).toEqual({ status: 404, body: { error: 'row_not_found', message: 'No inbox row 9' } });
  });

  it.each([
    [
      'outbox',
      'Processing',
      'processing',
      'Outbox row 5 is processing: only sent or dead rows are redacted, as a row in any other state may still be in delivery. Redact it once it is sent or dead',
    ],
    [
      'inbox',
      'Pending',
      'pending',
      'Inbox row 5 is pending: only processed or dead rows are redacted, as a row in any other state may still be in delivery. Redact it once it is processed or dead',
    ],
    [
      'outbox',
      'Failed',
      'failed',
      'Outbox row 5 is failed (a state this version does not know): only sent or dead rows are redacted, as a row in any other state may still be in delivery. Redact it once it is sent or dead',
    ],
  ] as const)('answers 409 not_final for a %s row that is %s', async (table, state, word, message) => {
    const { store } = redactingStore({ status: 'not_final', state });

    const answer = await createAdminHandler({ store, token: TOKEN }).handle(post(`/admin/${table}/5/redact`));

    expect(answer).toEqual({ status: 409, body: { error: 'not_final', message, state: word } });
  });

  it('refuses a request without the token before the store is reached', async () => {
    const { store, calls } = redactingStore({ status: 'redacted' });

    const answer = await createAdminHandler({ store, token: TOKEN }).handle(
      post('/admin/outbox/41/redact', { authorization: 'Bearer wrong' }),
    );

    expect(answer.status).toBe(401);
    expect(calls).toEqual([]);
  });
});
