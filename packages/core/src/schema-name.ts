/**
 * What every part of QueueBox accepts as the schema of its tables (`database.schema`, the stores, the client): a
 * letter or `_`, then letters, digits or `_`, 63 at most, so the name is an identifier on both databases and can
 * never close the quotes it is written in. Not a name PostgreSQL reserves: `pg_…` (PostgreSQL refuses to create one,
 * while PGlite accepted it, so a configuration ran locally and failed on a server) and `information_schema`, which
 * `pg_dump` leaves out, so the outbox and inbox were silently missing from every backup (an outside audit).
 */
export const SCHEMA_NAME_PATTERN =
  /^(?!pg_)(?!(?:information_schema|INFORMATION_SCHEMA)$)[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** The problem of a refused schema name, without the name (the caller puts it first). */
export const SCHEMA_NAME_RULE =
  'is not a valid schema name: use a letter or _ followed by up to 62 letters, digits or _, not starting with pg_ (PostgreSQL reserves it) and not information_schema (pg_dump leaves it out)';
