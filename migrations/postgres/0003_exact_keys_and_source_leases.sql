-- QueueBox 0003 (mirrors migrations/sqlserver/0003_exact_keys_and_source_leases.sql by number and name).
-- PostgreSQL already compares topic, key, source and idempotency_key exactly (deterministic collations: case and
-- trailing spaces count) and JSONB holds exactly one JSON value, so the SQL Server file's collation, length and
-- payload changes have nothing to do here. What both dialects share: inbox_lease is keyed (source, lease_until),
-- so a reclaim or takeover of some sources reads their expired rows only.

DROP INDEX inbox_lease;
CREATE INDEX inbox_lease ON inbox (source, lease_until) WHERE state = 'processing';
