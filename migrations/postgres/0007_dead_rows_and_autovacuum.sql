-- QueueBox 0007 (mirrors migrations/sqlserver/0007_dead_rows_and_autovacuum.sql by number and name, which has the
-- index only).
-- 1. outbox_dead, inbox_dead: the dead rows by id. A requeue takes the first dead rows in id order, batch after
--    batch; without them each batch walked the primary key from the smallest id past every row requeued before it
--    and every sent row (105,067 dead rows took 211 batches and 107 s, the last ones reading 169,000 buffers each).
--    Dead rows are few, and a row is written into these indexes only when it goes dead.
-- 2. Autovacuum for both tables at 1% of their rows (PostgreSQL's default is 20%): every claim and settle leaves a
--    dead tuple, and the claims step over the dead entries of the partial indexes until a vacuum removes them (a
--    one-row keyed claim read 1,159 buffers after 150,000 deliveries against 53 after a VACUUM); at 20% a million-row
--    outbox waited for 200,000 of them. The settings are the table's own; an operator may change them
--    (ALTER TABLE ... RESET restores the server's defaults).
-- The indexes are built inside the migration's transaction (as in 0004), which blocks writes to the tables for one
-- scan of each. Names are unqualified: the migrator sets search_path to the configured schema.

CREATE INDEX outbox_dead ON outbox (id) WHERE state = 'dead';
CREATE INDEX inbox_dead ON inbox (id) WHERE state = 'dead';

ALTER TABLE outbox SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
  autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 1000);
ALTER TABLE inbox SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
  autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 1000);
