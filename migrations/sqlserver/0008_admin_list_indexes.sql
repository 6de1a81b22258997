-- QueueBox 0008 (mirrors migrations/postgres/0008_admin_list_indexes.sql by number and name): the filtered index of
-- the admin list page that had none. A page is the next rows in ascending id after its cursor; a page of one state
-- otherwise read the clustered index from the cursor on and skipped the rows of every other state.
-- outbox_unknown_state, inbox_unknown_state: rows whose state literal this version does not know (listed as Failed).
-- A filtered index takes no NOT IN, so the filter is the same test as one <> per known literal, which is how the list
-- states it (store-sqlserver/src/admin-sql.ts): the optimizer matches a filtered index only to a query whose
-- predicate implies its filter. No row this version writes ever enters them.
-- Pending rows get no index here, as on PostgreSQL: one in id order would be one more index entry for every row
-- stored, retried or requeued, for an operator's page.

CREATE INDEX outbox_unknown_state ON [$(schema)].[outbox] (id)
  WHERE state <> N'pending' AND state <> N'processing' AND state <> N'sent' AND state <> N'dead';
CREATE INDEX inbox_unknown_state ON [$(schema)].[inbox] (id)
  WHERE state <> N'pending' AND state <> N'processing' AND state <> N'processed' AND state <> N'dead';
