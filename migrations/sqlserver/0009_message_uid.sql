-- QueueBox 0009 (mirrors migrations/postgres/0009_message_uid.sql by number and name): a random part of every outbox
-- message id, made when the row is inserted, so that a database that goes back in time (a point-in-time restore, a
-- failover that lost the last commits, a copy used as a second install) never delivers a new row under an id an
-- earlier one used: the message id of a new row is <install id>-<row id>-<message_uid, 32 hex digits>. Rows written
-- before this migration keep a NULL here and their old id.
-- A nullable column with a default, added without WITH VALUES, leaves the existing rows NULL and changes the
-- metadata only; NEWID() then fills each new row.

ALTER TABLE [$(schema)].[outbox] ADD message_uid UNIQUEIDENTIFIER NULL CONSTRAINT outbox_message_uid_df DEFAULT NEWID();
