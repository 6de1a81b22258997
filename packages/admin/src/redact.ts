import type { MessageState, RowId, Table } from '@queuebox/core';
import { stateWord } from './input.ts';

/** The final states of `table` as words, `sent or dead` / `processed or dead`. */
function finalWords(table: Table): string {
  return `${stateWord(table, 'Sent')} or ${stateWord(table, 'Dead')}`;
}

/**
 * Why row `id` of `table` was not redacted: it is `state`, not final, so it may still be delivered (outbox) or
 * forwarded or worked on (inbox); the one text of `POST /admin/<table>/:id/redact` (409 `not_final`) and of the CLI.
 */
export function redactNotFinalMessage(table: Table, id: RowId, state: MessageState): string {
  const what = `${table === 'outbox' ? 'Outbox' : 'Inbox'} row ${id} is ${stateWord(table, state)}`;
  const unknown = state === 'Failed' ? ' (a state this version does not know)' : '';
  return `${what}${unknown}: only ${finalWords(table)} rows are redacted, as a row in any other state may still be in delivery. Redact it once it is ${finalWords(table)}`;
}

/**
 * What an inbox redact leaves: the outbox rows the relay forwarded from inbox row `id` (and their replays) carry its
 * payload and headers, under header `x-inbox-id` (`@queuebox/inbox`'s `RELAY_HEADERS.inboxId`), and are rows of their
 * own.
 */
export function forwardedRowsNote(id: RowId): string {
  return `Outbox rows the relay forwarded from inbox row ${id} (header x-inbox-id: ${id}) hold their own copy of its payload and headers and were not changed: find them and redact each (see @queuebox/admin, "Redact")`;
}
