import { randomUUID } from 'node:crypto';
import type { BrokerMessage, InboxStore, Store } from '@queuebox/core';
import { MessageState, StoreUnavailableError } from '@queuebox/core';
import { openPostgresStore } from '@queuebox/store-postgres';
import { dropPostgresSchemaStatement, requireServices, useSchema } from '@queuebox/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sources, TransformFunctions } from '../src/index.ts';
import { createBrokerIngestion } from '../src/index.ts';

// A broker message that no try can store (a transform function that throws on it, a row the database refuses) must
// not hold up the messages behind it for ever: after deadAfterFailures failures over deadAfterMs it is a dead row.

const needs = await requireServices('broker poison', ['postgres']);

async function onDatabase(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: needs.url.postgres });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

const schema = useSchema('broker_poison', {
  async drop(name) {
    if (needs.available) await onDatabase(dropPostgresSchemaStatement(name).text);
  },
});

let store: Store;
beforeAll(async () => {
  if (!needs.available) return;
  store = await openPostgresStore({ url: needs.url.postgres, schema: schema.name, poolSize: 2 });
  await store.migrate();
  // The database refuses any row whose payload holds "refuse": what a check constraint or a trigger of the
  // operator's, or a value the server cannot keep, does to one message.
  await onDatabase(`
    CREATE FUNCTION "${schema.name}".refuse() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.payload ? 'refuse' THEN RAISE EXCEPTION 'this payload is refused'; END IF;
      IF NEW.payload ? 'momentary' AND NEW.state = 'pending' THEN
        RAISE EXCEPTION 'canceling statement due to lock timeout' USING ERRCODE = '55P03';
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER refuse BEFORE INSERT ON "${schema.name}".inbox
      FOR EACH ROW EXECUTE FUNCTION "${schema.name}".refuse();`);
});
afterAll(async () => {
  await store?.close();
});

const sources: Sources = {
  counted: {
    type: 'kafka',
    idempotencyKey: { path: '$.id' },
    transform: { function: 'picky' },
    deadAfterFailures: 3,
    deadAfterMs: 0,
  },
  timed: {
    type: 'nats',
    idempotencyKey: { path: '$.id' },
    transform: { function: 'picky' },
    deadAfterFailures: 2,
    deadAfterMs: 60_000,
  },
  defaults: { type: 'amqp', transform: { function: 'picky' } },
};

const transforms: TransformFunctions = {
  picky: ({ payload }) => {
    if ((payload as { poison?: boolean }).poison)
      throw new TypeError("Cannot read properties of undefined (reading 'amount')");
    return { payload };
  },
};

function aMessage(json: Record<string, unknown>, extra: Partial<BrokerMessage> = {}): BrokerMessage {
  return { body: new TextEncoder().encode(JSON.stringify(json)), headers: {}, ...extra };
}

function ingestionOver(inbox: InboxStore, clock?: { now(): number }) {
  return createBrokerIngestion({ store: inbox, sources, transforms, ...(clock ? { clock } : {}) });
}

describe.runIf(needs.available)('broker messages no try can store', () => {
  it('throws on the first tries, then stores the message as a dead row with the failure; the others go on meanwhile', async () => {
    // Prepare
    const ingestion = ingestionOver(store.inbox);
    const poison = aMessage({ id: `p-${randomUUID()}`, poison: true, amount: 1 });

    // Act / Assess: two failures, a good message between them, then the third try
    await expect(ingestion.ingest('counted', poison)).rejects.toThrow(TypeError);
    const good = await ingestion.ingest('counted', aMessage({ id: `g-${randomUUID()}` }));
    expect(good.status).toBe('stored');
    await expect(ingestion.ingest('counted', poison)).rejects.toThrow(TypeError);
    const third = await ingestion.ingest('counted', poison);

    expect(third.status).toBe('dead');
    expect(third.reason).toMatch(
      /^The ingestion failed 3 times since \d{4}-\d\d-\d\dT.*Z \(not a database outage\)/,
    );
    expect(third.reason).toContain("Cannot read properties of undefined (reading 'amount')");
    const row = await store.inbox.get(third.id);
    expect(row?.state).toBe(MessageState.Dead);
    expect(row?.payload).toEqual(JSON.parse(new TextDecoder().decode(poison.body)));
    expect(row?.lastError).toBe(third.reason);
    // A redelivery of it (a crash before the offset's commit) runs the transform again, before the duplicate check,
    // and comes to the same dead row after as many tries: one row.
    await expect(ingestion.ingest('counted', poison)).rejects.toThrow(TypeError);
    await expect(ingestion.ingest('counted', poison)).rejects.toThrow(TypeError);
    expect(await ingestion.ingest('counted', poison)).toMatchObject({ status: 'duplicate', id: third.id });
  });

  it('waits for deadAfterMs as well as the count', async () => {
    // Prepare
    let now = Date.parse('2026-12-06T10:00:00Z');
    const ingestion = ingestionOver(store.inbox, { now: () => now });
    const poison = aMessage({ id: `t-${randomUUID()}`, poison: true });

    // Act / Assess: the count is reached at once, the time 60 s later
    await expect(ingestion.ingest('timed', poison)).rejects.toThrow(TypeError);
    now += 30_000;
    await expect(ingestion.ingest('timed', poison)).rejects.toThrow(TypeError);
    now += 29_999;
    await expect(ingestion.ingest('timed', poison)).rejects.toThrow(TypeError);
    now += 1;
    const result = await ingestion.ingest('timed', poison);
    expect(result.status).toBe('dead');
    expect(result.reason).toContain('failed 4 times since 2026-12-06T10:00:00.000Z');
  });

  it('by default waits 10 failures over 5 minutes; a message without an id is counted by its body', async () => {
    // Prepare: an AMQP message without a message-id gets a new random key at every delivery
    let now = Date.parse('2026-12-06T11:00:00Z');
    const ingestion = ingestionOver(store.inbox, { now: () => now });
    const poison = aMessage({ poison: true, n: randomUUID() });

    // Act / Assess
    for (let i = 1; i <= 10; i++) {
      await expect(ingestion.ingest('defaults', poison)).rejects.toThrow(TypeError);
      now += 30_000 - 1;
    }
    now += 10;
    const result = await ingestion.ingest('defaults', poison);
    expect(result.status).toBe('dead');
    expect(result.reason).toContain('failed 11 times');
  });

  it('keeps the body as base64 when the database refuses the message, and its dead row too', async () => {
    // Prepare
    const ingestion = ingestionOver(store.inbox);
    const refused = aMessage({ id: `r-${randomUUID()}`, refuse: 'me' });

    // Act
    await expect(ingestion.ingest('counted', refused)).rejects.toThrow(/this payload is refused/);
    await expect(ingestion.ingest('counted', refused)).rejects.toThrow(/this payload is refused/);
    const result = await ingestion.ingest('counted', refused);

    // Assess
    expect(result.status).toBe('dead');
    expect(result.reason).toMatch(
      /failed 3 times .* last with: .*this payload is refused; the message is kept as base64, as the database refused it: .*this payload is refused/,
    );
    const row = await store.inbox.get(result.id);
    expect(row?.state).toBe(MessageState.Dead);
    expect(row?.payload).toEqual({ base64: Buffer.from(refused.body).toString('base64') });
  });

  it('does not count a database outage as a failure of the message', async () => {
    // Prepare: the ingestion's store is down, then up (two real stores, one switch); a message the database refuses
    const down = await openPostgresStore({
      url: 'postgres://postgres@127.0.0.1:1/test',
      schema: schema.name,
    });
    let current: InboxStore = down.inbox;
    const switching = new Proxy({} as InboxStore, {
      get: (_target, property) => {
        const value = current[property as keyof InboxStore];
        return typeof value === 'function' ? value.bind(current) : value;
      },
    });
    const ingestion = ingestionOver(switching);
    const refused = aMessage({ id: `o-${randomUUID()}`, refuse: 'me' });
    const good = aMessage({ id: `o-${randomUUID()}` });
    try {
      // Act: more outages than deadAfterFailures, then the database is back
      for (let i = 0; i < 5; i++) {
        await expect(ingestion.ingest('counted', refused)).rejects.toBeInstanceOf(StoreUnavailableError);
        await expect(ingestion.ingest('counted', good)).rejects.toBeInstanceOf(StoreUnavailableError);
      }
      current = store.inbox;

      // Assess: the good message is stored; the refused one has failed once, not six times
      expect((await ingestion.ingest('counted', good)).status).toBe('stored');
      await expect(ingestion.ingest('counted', refused)).rejects.toThrow(/this payload is refused/);
      await expect(ingestion.ingest('counted', refused)).rejects.toThrow(/this payload is refused/);
      expect(await ingestion.ingest('counted', refused)).toMatchObject({ status: 'dead' });
    } finally {
      await down.close();
    }
  });

  it('does not count a statement the database refused for the moment (a lock timeout), unless on the last delivery', async () => {
    // Prepare: the trigger answers a pending row holding "momentary" with SQLSTATE 55P03, a lock timeout, as the
    // database does while VACUUM FULL, ALTER TABLE or a migration holds the table; a dead row goes through
    const ingestion = ingestionOver(store.inbox);
    const healthy = aMessage({ id: `l-${randomUUID()}`, momentary: true });

    // Act: more failures than deadAfterFailures (3, over 0 ms)
    for (let i = 0; i < 5; i++)
      await expect(ingestion.ingest('counted', healthy)).rejects.toThrow(
        /canceling statement due to lock timeout/,
      );
    const last = await ingestion.ingest('counted', { ...healthy, lastDelivery: true });

    // Assess: never dead for the database's moment; on the broker's last delivery, dead (not dropped), as it came
    expect(last.status).toBe('dead');
    expect(last.reason).toMatch(
      /failed once .*at the broker's last delivery of it\), last with: .*lock timeout$/,
    );
    expect((await store.inbox.get(last.id))?.payload).toEqual(
      JSON.parse(new TextDecoder().decode(healthy.body)),
    );
  });

  it('forgets the failures of a message once it is stored', async () => {
    // Prepare: a transform that fails twice, then works (a dependency that came back)
    let failuresLeft = 2;
    const flaky = createBrokerIngestion({
      store: store.inbox,
      sources,
      transforms: {
        picky: ({ payload }) => {
          if (failuresLeft-- > 0) throw new Error('the rates service is down');
          return { payload };
        },
      },
    });
    const id = `f-${randomUUID()}`;

    // Act / Assess: two failures then a stored row; the same key later starts from zero
    await expect(flaky.ingest('counted', aMessage({ id }))).rejects.toThrow('the rates service is down');
    await expect(flaky.ingest('counted', aMessage({ id }))).rejects.toThrow('the rates service is down');
    expect((await flaky.ingest('counted', aMessage({ id }))).status).toBe('stored');
    failuresLeft = 1;
    await expect(flaky.ingest('counted', aMessage({ id }))).rejects.toThrow('the rates service is down');
    expect((await flaky.ingest('counted', aMessage({ id }))).status).toBe('duplicate');
  });
});
