-- QueueBox 0002: wake-ups. An insert into outbox or inbox notifies the channel queuebox_outbox or queuebox_inbox
-- with the schema's name as payload, once per statement (a bulk insert or enqueueMany sends one notification, and
-- PostgreSQL folds identical notifications of one transaction into one). The local runtime LISTENs on both
-- channels (packages/capture) and drains at once instead of at its next poll. Nothing depends on a notification
-- arriving: the pollers still poll. NOTIFY is sent at COMMIT, so a rolled-back insert wakes nobody.
-- Names are unqualified: the migrator sets search_path to the configured schema.

CREATE FUNCTION queuebox_notify_insert() RETURNS trigger
  LANGUAGE plpgsql
  AS $$
BEGIN
  -- TG_ARGV[0] is the channel; the payload names the schema, so listeners of other schemas ignore it.
  PERFORM pg_notify(TG_ARGV[0], TG_TABLE_SCHEMA);
  RETURN NULL;
END
$$;

CREATE TRIGGER outbox_notify_insert AFTER INSERT ON outbox
  FOR EACH STATEMENT EXECUTE FUNCTION queuebox_notify_insert('queuebox_outbox');

CREATE TRIGGER inbox_notify_insert AFTER INSERT ON inbox
  FOR EACH STATEMENT EXECUTE FUNCTION queuebox_notify_insert('queuebox_inbox');
