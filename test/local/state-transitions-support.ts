/**
 * What `state-transitions.postgres.integration.test.ts` needs besides the runtime: a recorder of every state change
 * of a schema's `outbox` and `inbox` rows (row-level AFTER triggers installed by the test only), the specification's
 * two state tables ("How QueueBox works", "Outbox states" and "Inbox states") as data, the check of recorded
 * transitions against them, and an HTTP sink whose answers the test steers per path.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';

/** The recorder table, inside the QueueBox schema under test. */
export const RECORDER_TABLE = 'aud_st_transitions';

/**
 * SQL that installs the recorder in `schema` (an identifier checked by the caller): a table, one trigger function and
 * three row-level AFTER triggers per table. INSERT records `(NULL → state)`; UPDATE records only when the state or the
 * claim token changed (a takeover is `processing → processing` with a new token); DELETE records `(state → NULL)`.
 * The function returns NULL (ignored for AFTER triggers), raises nothing and writes only its own table, so
 * QueueBox's statements behave as without it. The sequence is an identity: a later change of one row always gets a
 * larger number (the second writer waits for the first's row lock, so its trigger runs after the first committed).
 */
export function recorderSql(schema: string): string {
  const s = `"${schema}"`;
  return `
CREATE TABLE ${s}.${RECORDER_TABLE} (
  seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tbl        TEXT NOT NULL,
  op         TEXT NOT NULL,
  row_id     BIGINT NOT NULL,
  old_state  TEXT NULL,
  new_state  TEXT NULL,
  old_token  TEXT NULL,
  new_token  TEXT NULL,
  attempt    INTEGER NULL,
  label      TEXT NULL,
  at         TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION ${s}.aud_st_record() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  o jsonb := CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE to_jsonb(OLD) END;
  n jsonb := CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE to_jsonb(NEW) END;
  r jsonb := coalesce(n, o);
BEGIN
  INSERT INTO ${s}.${RECORDER_TABLE} (tbl, op, row_id, old_state, new_state, old_token, new_token, attempt, label)
  VALUES (TG_TABLE_NAME, TG_OP, (r->>'id')::bigint, o->>'state', n->>'state', o->>'claim_token',
          n->>'claim_token', (r->>'attempt')::int,
          CASE WHEN TG_TABLE_NAME = 'outbox' THEN r->>'topic' ELSE r->>'source' END);
  RETURN NULL;
END
$fn$;
CREATE TRIGGER aud_st_outbox_insert AFTER INSERT ON ${s}.outbox
  FOR EACH ROW EXECUTE FUNCTION ${s}.aud_st_record();
CREATE TRIGGER aud_st_outbox_update AFTER UPDATE ON ${s}.outbox
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.claim_token IS DISTINCT FROM NEW.claim_token)
  EXECUTE FUNCTION ${s}.aud_st_record();
CREATE TRIGGER aud_st_outbox_delete AFTER DELETE ON ${s}.outbox
  FOR EACH ROW EXECUTE FUNCTION ${s}.aud_st_record();
CREATE TRIGGER aud_st_inbox_insert AFTER INSERT ON ${s}.inbox
  FOR EACH ROW EXECUTE FUNCTION ${s}.aud_st_record();
CREATE TRIGGER aud_st_inbox_update AFTER UPDATE ON ${s}.inbox
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.claim_token IS DISTINCT FROM NEW.claim_token)
  EXECUTE FUNCTION ${s}.aud_st_record();
CREATE TRIGGER aud_st_inbox_delete AFTER DELETE ON ${s}.inbox
  FOR EACH ROW EXECUTE FUNCTION ${s}.aud_st_record();
`;
}

export type Table = 'outbox' | 'inbox';

/** One recorded change. `from` is null for an insert, `to` null for a delete. */
export interface Transition {
  readonly seq: number;
  readonly table: Table;
  readonly op: 'INSERT' | 'UPDATE' | 'DELETE';
  readonly id: string;
  readonly from: string | null;
  readonly to: string | null;
  readonly oldToken: string | null;
  readonly newToken: string | null;
  readonly attempt: number | null;
  /** The outbox row's topic, or the inbox row's source. */
  readonly label: string | null;
}

/** Every recorded change, in sequence order. */
export async function readTransitions(pool: pg.Pool, schema: string): Promise<Transition[]> {
  const { rows } = await pool.query<{
    seq: string;
    tbl: Table;
    op: Transition['op'];
    row_id: string;
    old_state: string | null;
    new_state: string | null;
    old_token: string | null;
    new_token: string | null;
    attempt: number | null;
    label: string | null;
  }>(`SELECT * FROM "${schema}".${RECORDER_TABLE} ORDER BY seq`);
  return rows.map((r) => ({
    seq: Number(r.seq),
    table: r.tbl,
    op: r.op,
    id: String(r.row_id),
    from: r.old_state,
    to: r.new_state,
    oldToken: r.old_token,
    newToken: r.new_token,
    attempt: r.attempt,
    label: r.label,
  }));
}

/** `(insert)` / `(store)` for a new row, else the state. */
export function fromName(t: Pick<Transition, 'table' | 'from'>): string {
  if (t.from !== null) return t.from;
  return t.table === 'outbox' ? '(insert)' : '(store)';
}

/** `outbox: pending → processing`. */
export function pairName(t: Pick<Transition, 'table' | 'from' | 'to'>): string {
  return `${t.table}: ${fromName(t)} → ${t.to ?? '(deleted)'}`;
}

/** The specification's outbox table ("Outbox states"), From → To. */
export const SPEC_OUTBOX: readonly (readonly [string, string])[] = [
  ['(insert)', 'pending'],
  ['pending', 'processing'],
  ['processing', 'sent'],
  ['processing', 'pending'],
  ['processing', 'dead'],
];

/** The specification's inbox table ("Inbox states"), From → To. */
export const SPEC_INBOX: readonly (readonly [string, string])[] = [
  ['(store)', 'pending'],
  ['(store)', 'dead'],
  ['pending', 'processing'],
  ['processing', 'processed'],
  ['processing', 'pending'],
  ['processing', 'processing'],
  ['processing', 'dead'],
];

/** What the test did as an operator (the admin API), by table and row id. */
export interface OperatorActions {
  /** Rows requeued (dead → pending), per table. */
  readonly requeued: Readonly<Record<Table, readonly string[]>>;
  /** Outbox rows a replay inserted (the `id` of its answer). */
  readonly replayInserts: readonly string[];
}

/** Source types whose messages the specification lets the inbox store dead ("(store) → dead"). */
const BROKER_SOURCE_TYPES = new Set(['amqp', 'kafka', 'nats', 'sqs']);

/** How {@link classify} sorted the recorded changes. */
export interface Classified {
  /** Transitions of the specification's tables. */
  readonly spec: Transition[];
  /** Operator moves the test performed: `outbox requeue`, `outbox replay`, `inbox requeue`. */
  readonly operator: { readonly kind: string; readonly t: Transition }[];
  /** Everything else, each with why it is off the specification. */
  readonly offSpec: { readonly why: string; readonly t: Transition }[];
}

/**
 * Sorts every recorded change into the specification's transitions, the operator moves the test made, and the rest
 * (off the specification). Besides the (from, to) pair it checks what the tables imply: an inbox `(store) → dead`
 * only for a broker source (the table's "When": an AMQP source's rejected transform, a broker body that is not
 * JSON); `processing → processing` only with a new claim token; each operator move at most once per action taken;
 * no row deleted (the test runs no retention or purge); and every row's changes chained (each `from` is the state
 * the previous change of that row left).
 */
export function classify(
  transitions: readonly Transition[],
  operator: OperatorActions,
  sourceTypes: Readonly<Record<string, string>>,
): Classified {
  const spec: Transition[] = [];
  const moves: Classified['operator'] = [];
  const offSpec: Classified['offSpec'] = [];
  const requeuesLeft: Record<Table, Map<string, number>> = { outbox: new Map(), inbox: new Map() };
  for (const table of ['outbox', 'inbox'] as const) {
    for (const id of operator.requeued[table])
      requeuesLeft[table].set(id, (requeuesLeft[table].get(id) ?? 0) + 1);
  }
  const replays = new Set(operator.replayInserts);
  const last = new Map<string, string | null>();

  for (const t of transitions) {
    const rowKey = `${t.table}:${t.id}`;
    const previous = last.get(rowKey);
    if (t.op === 'INSERT' && previous !== undefined) {
      offSpec.push({ why: 'a second insert of one row id', t });
    } else if (t.op !== 'INSERT' && previous !== t.from) {
      offSpec.push({
        why: `does not follow the row's previous recorded state (${previous ?? 'none recorded'})`,
        t,
      });
    }
    last.set(rowKey, t.to);

    if (t.op === 'DELETE') {
      offSpec.push({ why: 'a row was deleted (no retention or purge ran in this test)', t });
      continue;
    }
    if (t.table === 'outbox' && t.op === 'INSERT' && replays.has(t.id)) {
      if (t.to === 'pending') moves.push({ kind: 'outbox replay: (insert) → pending', t });
      else offSpec.push({ why: 'a replay inserted a row that is not pending', t });
      continue;
    }
    if (t.from === 'dead' && t.to === 'pending') {
      const left = requeuesLeft[t.table].get(t.id) ?? 0;
      if (left > 0) {
        requeuesLeft[t.table].set(t.id, left - 1);
        moves.push({ kind: `${t.table} requeue: dead → pending`, t });
      } else {
        offSpec.push({ why: 'dead → pending without an operator requeue of this row', t });
      }
      continue;
    }
    const table = t.table === 'outbox' ? SPEC_OUTBOX : SPEC_INBOX;
    const from = fromName(t);
    if (!table.some(([f, to]) => f === from && to === t.to)) {
      offSpec.push({ why: 'not in the specification’s table', t });
      continue;
    }
    if (t.table === 'inbox' && t.from === null && t.to === 'dead') {
      const type = t.label === null ? undefined : sourceTypes[t.label];
      if (type === undefined || !BROKER_SOURCE_TYPES.has(type)) {
        offSpec.push({
          why: `(store) → dead of a ${type ?? 'unknown'} source (the table allows it for broker sources only)`,
          t,
        });
        continue;
      }
    }
    if (t.from === 'processing' && t.to === 'processing' && t.oldToken === t.newToken) {
      offSpec.push({ why: 'processing → processing without a new claim token', t });
      continue;
    }
    spec.push(t);
  }
  return { spec, operator: moves, offSpec };
}

/** One line per off-specification change, for the failure message. */
export function describeOffSpec(offSpec: Classified['offSpec']): string[] {
  return offSpec.map(
    ({ why, t }) =>
      `#${t.seq} ${t.table} row ${t.id} (${t.label ?? '?'}): ${fromName(t)} → ${t.to ?? '(deleted)'} — ${why}`,
  );
}

/** The transitions of one row, as `from → to` strings in order. */
export function pathOf(transitions: readonly Transition[], table: Table, id: string): string[] {
  return transitions
    .filter((t) => t.table === table && t.id === id)
    .map((t) => `${fromName(t)} → ${t.to ?? '(deleted)'}`);
}

// ------------------------------------------------------------------------------------------------------------
// The sink

/** Listens on a port the system picks; answers it. */
async function listenOnAnyPort(server: Server): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

/** The sink: `/ok` answers 204, `/flaky` 500 to the first `flakyFailures` requests of each body then 204, `/fail` 500 while `failing`. */
export interface Sink {
  readonly port: number;
  readonly url: string;
  /** Bodies received, by path. */
  readonly received: Map<string, string[]>;
  /** `/fail` answers 500 while true. */
  failing: boolean;
  close(): Promise<void>;
}

export async function startSink(flakyFailures: number): Promise<Sink> {
  const received = new Map<string, string[]>();
  const seen = new Map<string, number>();
  const sink: Sink = {
    port: 0,
    url: '',
    received,
    failing: true,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const path = request.url ?? '';
      const body = Buffer.concat(chunks).toString('utf8');
      received.set(path, [...(received.get(path) ?? []), body]);
      let status = 204;
      if (path === '/flaky') {
        const count = (seen.get(body) ?? 0) + 1;
        seen.set(body, count);
        if (count <= flakyFailures) status = 500;
      } else if (path === '/fail') {
        if (sink.failing) status = 500;
      } else if (path !== '/ok') {
        status = 404;
      }
      response.writeHead(status, { 'content-type': 'text/plain' });
      response.end(status === 500 ? 'failing on purpose' : '');
    });
  });
  const port = await listenOnAnyPort(server);
  return Object.assign(sink, { port, url: `http://127.0.0.1:${port}` });
}
