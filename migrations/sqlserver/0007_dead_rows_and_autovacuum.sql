-- QueueBox 0007 (mirrors migrations/postgres/0007_dead_rows_and_autovacuum.sql by number and name). SQL Server has no
-- autovacuum (its ghost cleanup needs no setting), so only the indexes: outbox_dead and inbox_dead, the dead rows by
-- id, which a requeue reads batch after batch in id order (without them each batch read the clustered index from
-- the smallest id, past every row requeued before it). Dead rows are few, and a row enters these filtered indexes
-- only when it goes dead.

CREATE INDEX outbox_dead ON [$(schema)].[outbox] (id) WHERE state = N'dead';
CREATE INDEX inbox_dead ON [$(schema)].[inbox] (id) WHERE state = N'dead';
