import { outboxMessageId, type RowId, type Store } from '@queuebox/core';

/**
 * The message ids the outbox delivers the rows `ids` under: `outboxMessageId` with the schema's install id and each
 * row's `message_uid` (migration 0009), read from the store, in the order of `ids`.
 */
export async function messageIdsOf(
  store: Pick<Store, 'installId' | 'outbox'>,
  ids: readonly RowId[],
): Promise<string[]> {
  const installId = await store.installId();
  return Promise.all(
    ids.map(async (id) => {
      const row = await store.outbox.get(id);
      if (row === undefined) throw new Error(`outbox row ${id} is gone`);
      return outboxMessageId(id, installId, row.messageUid);
    }),
  );
}
