-- QueueBox 0009: a random part of every outbox message id, made when the row is inserted.
-- A message id was <install id>-<row id> (0005). A database that goes back in time reuses row ids: a point-in-time
-- restore, a failover to a replica that had not received the last commits, a copy restored from a dump. The rows
-- written afterwards were delivered under ids their predecessors had already used, and a receiver that deduplicates
-- on the message id (Idempotency-Key, webhook-id, Nats-Msg-Id, an SQS FIFO deduplication id) dropped them as
-- duplicates while QueueBox counted them sent (an outside audit). A copy used as a second install (staging cloned
-- from production) did the same across the two. With this column the message id of a new row is
-- <install id>-<row id>-<message_uid, 32 hex digits>: a restored row keeps its id, so its redelivery is still a
-- duplicate to the receiver, and a row written after the restore or in the copy gets a new one whatever its row id.
-- Rows written before this migration keep a NULL here and their old id, so a row in the middle of its retries
-- keeps the id of its earlier attempts.
-- Both statements change the catalog only: a column without a default is added without rewriting the table, and
-- the default then applies to new rows alone. Names are unqualified: the migrator sets search_path to the schema.

ALTER TABLE outbox ADD COLUMN message_uid UUID;
ALTER TABLE outbox ALTER COLUMN message_uid SET DEFAULT gen_random_uuid();
