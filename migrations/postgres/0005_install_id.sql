-- QueueBox 0005: the install id, which makes every outbox message id unique across databases and schemas.
-- Row ids are identities that start at 1 in every schema, so two QueueBox installs (or one schema dropped and
-- migrated again) deliver different messages under one row id, and a receiver that deduplicates on the message id
-- (JetStream's Nats-Msg-Id window, an inbox keyed by message-id, Idempotency-Key) drops the second as a duplicate.
-- Deliveries therefore carry <install id>-<row id> (see packages/core/src/ports/message-id.ts). The install id is
-- 32 lower-case hex digits, random, made here once; the store reads it once and keeps it.
-- One row: its primary key is a column that can only be true. A copy of the database (a restored backup used as a
-- second install) keeps the id; give the copy one of its own before it delivers, then restart its processes:
--   UPDATE queuebox.install SET id = replace(gen_random_uuid()::text, '-', '');   -- queuebox: your schema
-- Names are unqualified: the migrator sets search_path to the configured schema.

CREATE TABLE install (
  singleton  BOOLEAN NOT NULL DEFAULT TRUE,
  id         VARCHAR(32) NOT NULL,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  CONSTRAINT install_pkey PRIMARY KEY (singleton),
  CONSTRAINT install_singleton_ck CHECK (singleton),
  CONSTRAINT install_id_ck CHECK (id ~ '^[0-9a-f]{32}$')
);

INSERT INTO install (id) VALUES (replace(gen_random_uuid()::text, '-', ''));
