/**
 * Every statement of this package through a real T-SQL parser (node-sql-parser,
 * `database: 'transactsql'`). No SQL Server runs here, so this is the syntax check; the contract suite in
 * test/contract runs the statements against a server where one is available. What the parser could not read is
 * recorded in PARSE_TABLE (parse-tables.ts), and README.md repeats that table with the migrations' rows (checked at
 * the end). The migrations are checked in sql-parse-migration-0001.test.ts and sql-parse-migration-0003.test.ts.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as adminSql from '../src/admin-sql.ts';
import * as inboxClaim from '../src/inbox-claim.ts';
import * as inboxDedupe from '../src/inbox-dedupe.ts';
import * as inboxSql from '../src/inbox-sql.ts';
import * as lease from '../src/lease.ts';
import { MIGRATIONS } from '../src/migrations.generated.ts';
import * as migrator from '../src/migrator.ts';
import * as outboxClaim from '../src/outbox-claim.ts';
import { outboxKeyLockResource } from '../src/outbox-key-lock.ts';
import * as outboxSql from '../src/outbox-sql.ts';
import * as settings from '../src/settings.ts';
import {
  type Ast,
  COMPUTED,
  COUNT_BIG,
  EXEC_STATUS,
  first,
  IF_GUARD,
  MIGRATION_0003_PARSE_TABLE,
  MIGRATION_PARSE_TABLE,
  NAMED_DEFAULT,
  NOCHECK,
  OPENJSON_WITH,
  OUTPUT,
  PARSE_TABLE,
  RCLOCK,
  RECOMPILE,
  TOP,
} from './parse-tables.ts';
import { SCHEMA, STATEMENTS } from './statements.ts';
import { checkTsql, parseTsql, SET_ASIDE } from './tsql-check.ts';

/** Statement functions of the *-sql.ts modules, the claim, dedupe and lease modules and the migrator (everything exported that is not a helper). */
const HELPERS = new Set([
  'clampDelayMs',
  'utcNowPlus',
  'jsonParam',
  'claimJson',
  'sameAggregate',
  'outboxMessagesJson',
  'statementRows',
  'rowsPerSource',
  'isSource',
  'createOutboxClaim',
  'claimInboxRows',
  'storeInboxRow',
  'reclaimExpiredOutbox',
  'reclaimExpiredInbox',
  'checkServerSettings',
  'settingsWarnings',
  'renderMigration',
  'migrationLockResource',
  'migrationLockTimeoutMs',
  'splitBatches',
  'withNewerSchema',
]);
const STATEMENT_FUNCTIONS = [
  ...Object.entries(outboxSql),
  ...Object.entries(outboxClaim),
  ...Object.entries(inboxSql),
  ...Object.entries(inboxClaim),
  ...Object.entries(inboxDedupe),
  ...Object.entries(lease),
  ...Object.entries(adminSql),
  ...Object.entries(migrator).filter(([name]) => name !== 'runMigrations'),
  ...Object.entries(settings),
]
  .filter(([name, value]) => typeof value === 'function' && !HELPERS.has(name))
  .map(([name]) => name);

describe('the T-SQL parse check of every statement', () => {
  it('covers every statement function of the *-sql.ts, claim, dedupe and lease modules and migrator.ts', () => {
    const covered = new Set(Object.keys(STATEMENTS).map((name) => name.replace(/ \(.*\)$/, '')));
    expect(STATEMENT_FUNCTIONS.filter((name) => !covered.has(name))).toEqual([]);
    expect(Object.keys(PARSE_TABLE).sort()).toEqual(Object.keys(STATEMENTS).sort());
  });

  it.each(Object.entries(STATEMENTS))('%s parses as PARSE_TABLE records', (name, statement) => {
    const outcome = checkTsql(statement.text);

    expect({ verbatim: outcome.verbatim, setAside: outcome.setAside }).toEqual(PARSE_TABLE[name]);
  });

  it.each(Object.entries(STATEMENTS))(
    '%s names its tables with the configured schema',
    (_name, statement) => {
      const { parsed } = checkTsql(statement.text);

      // Entries are `verb::schema::table`; a null schema is an alias (o, i, b, r) or a CTE (due, chosen, expired).
      for (const entry of parsed.tableList) {
        const [, schema, table] = entry.split('::');
        if (schema === 'null')
          expect([
            'o',
            'i',
            'b',
            'r',
            'due',
            'chosen',
            'expired',
            '@window',
            '@earlier',
            '@candidates',
            // adminRequeueCandidatesStatement's CTEs (whole keys).
            'firsts',
            'ahead',
            'leads',
            'whole',
            'ranked',
          ]).toContain(table);
        else if (schema === 'sys')
          expect(['databases', 'triggers', 'partitions', 'columns']).toContain(table);
        else
          expect([schema, table]).toEqual([
            SCHEMA,
            expect.stringMatching(/^(outbox|inbox|schema_migrations)$/),
          ]);
      }
      // No table name appears without its schema anywhere in the text either.
      expect(statement.text).not.toMatch(/(?<!\]\.)\[(outbox|inbox|schema_migrations)\]/);
    },
  );

  it('reads the claim as an UPDATE of the outbox joined to a CTE that reads the outbox with UPDLOCK, READPAST', () => {
    const { parsed } = checkTsql(STATEMENTS.claimOutboxStatement?.text ?? '');
    const statements = (Array.isArray(parsed.ast) ? parsed.ast : [parsed.ast]) as Ast[];
    const update = statements.find((s) => s.type === 'update') ?? {};

    expect(statements.map((s) => s.type)).toEqual(['set', 'set', 'declare', 'update', 'set']);
    expect(JSON.stringify(update.with)).toContain('"READPAST"');
    expect(JSON.stringify(update.with)).toContain('"UPDLOCK"');
    expect(parsed.tableList).toContain(`update::${SCHEMA}::outbox`);
    expect(parsed.tableList).toContain(`select::${SCHEMA}::outbox`);
  });

  /** The batches that read rows to take them: the claims, the reclaims, requeue and purge. */
  const TAKING = [
    'claimOutboxStatement',
    'reclaimExpiredOutboxStatement',
    'claimInboxStatement',
    'claimInboxStatement (takeOverExpired)',
    'claimInboxStatement (relay, no payload)',
    'reclaimExpiredInboxStatement',
    'adminRequeueStatement',
    'adminRequeueStatement (inbox, ids)',
    'adminPurgeStatement',
  ];

  it.each(TAKING)(
    '%s pins READ COMMITTED, bounds lock waits, locks with READCOMMITTEDLOCK and seeks its target by key',
    (name) => {
      const text = STATEMENTS[name]?.text ?? '';

      expect(
        text.startsWith('SET TRANSACTION ISOLATION LEVEL READ COMMITTED;\nSET LOCK_TIMEOUT 1000;\n'),
      ).toBe(true);
      expect(text.endsWith('\nSET LOCK_TIMEOUT -1;')).toBe(true);
      expect(text).toContain('WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK)');
      expect(text).not.toMatch(/WITH \(UPDLOCK, READPAST, ROWLOCK\)/);
      expect(text).toMatch(
        /^(?:UPDATE|DELETE) [a-z]\n(?:[\s\S]*\n)?FROM \[qb_test\]\.\[(?:outbox|inbox)\] AS [a-z] WITH \(FORCESEEK\)\n/m,
      );
    },
  );

  it('picks keyed candidates without locks, fences them with TOP, then locks only those by key', () => {
    const text = STATEMENTS.claimOutboxStatement?.text ?? '';
    const t = `[${SCHEMA}].[outbox]`;

    // The heads and the candidate rows are read without any table hint ...
    expect(text).toContain(
      `FROM ${t} AS a\n        WHERE a.state IN (N'pending', N'processing') AND a.[key] IS NOT NULL\n        GROUP BY a.[key], DATALENGTH(a.[key])`,
    );
    expect(text).toContain(
      `INNER JOIN ${t} AS h ON h.id = head.id\n      WHERE h.state = N'pending' AND h.scheduled_at <= `,
    );
    // ... the oldest @batchSize of them form a derived table (the fence), and only those rows are locked, by key,
    // with state and due time checked again on the locked row.
    expect(text).toMatch(
      /SELECT TOP \(@batchSize\) h\.id[\s\S]*ORDER BY h\.scheduled_at, h\.id\n {4}\) AS k\n {4}INNER JOIN \[qb_test\]\.\[outbox\] AS l WITH \(UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK, FORCESEEK\) ON l\.id = k\.id\n {4}WHERE l\.state = N'pending' AND l\.scheduled_at <= CAST\(SYSUTCDATETIME\(\) AS DATETIME2\(3\)\)\n/,
    );
  });

  it.each([
    [
      'claimOutboxStatement',
      "WHERE o.state = N'pending' AND o.scheduled_at <= CAST(SYSUTCDATETIME() AS DATETIME2(3))\n  AND (o.[key] IS NULL OR NOT EXISTS (\n    SELECT 1 FROM [qb_test].[outbox] AS e WITH (ROWLOCK, READCOMMITTEDLOCK)\n    WHERE e.[key] = o.[key] AND DATALENGTH(e.[key]) = DATALENGTH(o.[key]) AND e.id < o.id\n      AND e.state IN (N'pending', N'processing') AND e.[key] IS NOT NULL\n  ));",
    ],
    [
      'reclaimExpiredOutboxStatement',
      "WHERE o.state = N'processing' AND o.lease_until < CAST(SYSUTCDATETIME() AS DATETIME2(3));",
    ],
    [
      'claimInboxStatement',
      "WHERE i.state = N'pending' AND i.scheduled_at <= CAST(SYSUTCDATETIME() AS DATETIME2(3));",
    ],
    [
      'claimInboxStatement (takeOverExpired)',
      "WHERE (i.state = N'pending' AND i.scheduled_at <= CAST(SYSUTCDATETIME() AS DATETIME2(3))) OR (i.state = N'processing' AND i.lease_until < CAST(SYSUTCDATETIME() AS DATETIME2(3)));",
    ],
    [
      'claimInboxStatement (relay, no payload)',
      "WHERE i.state = N'pending' AND i.scheduled_at <= CAST(SYSUTCDATETIME() AS DATETIME2(3));",
    ],
    [
      'reclaimExpiredInboxStatement',
      "WHERE b.state = N'processing' AND b.lease_until < CAST(SYSUTCDATETIME() AS DATETIME2(3));",
    ],
  ])('%s re-checks in its UPDATE the whole predicate its CTE chose by', (name, where) => {
    expect(STATEMENTS[name]?.text).toContain(`\n${where}\n`);
  });

  describe('requeue keeps one row of a key in flight', () => {
    const t = `[${SCHEMA}].[outbox]`;
    const idle = (alias: string) =>
      `(${alias}.[key] IS NULL OR NOT EXISTS (SELECT 1 FROM ${t} AS p WHERE p.state = N'processing' AND p.[key] = ${alias}.[key] AND DATALENGTH(p.[key]) = DATALENGTH(${alias}.[key])))`;

    it.each(['adminRequeuePreviewStatement', 'adminRequeueStatement', 'adminRequeueCandidatesStatement'])(
      '%s takes outbox rows only when no row of their key is processing (exact key comparison)',
      (name) => {
        const text = STATEMENTS[name]?.text ?? '';
        const where = text.split('\n').find((line) => line.trimStart().startsWith('WHERE o.state'));

        expect(where?.trim()).toMatch(/^WHERE o\.state = N'dead' AND /);
        expect(where?.endsWith(` AND ${idle('o')}`)).toBe(true);
      },
    );

    it('leaves an inbox row dead while a row of its source and aggregate id is processing, compared as the relay compares them', () => {
      const text = STATEMENTS['adminRequeueStatement (inbox, ids)']?.text ?? '';

      expect(text).toContain(
        `AND (o.aggregate_id IS NULL OR NOT EXISTS (SELECT 1 FROM ${t.replace('outbox', 'inbox')} AS p WHERE p.state = N'processing' AND ${inboxClaim.sameAggregate('p', 'o')}))`,
      );
      expect(text).not.toContain('[key]');
    });

    it('adminRequeueCandidatesStatement takes whole keys and locks the candidates it answers, with their keys, skipping held rows', () => {
      const text = STATEMENTS.adminRequeueCandidatesStatement?.text ?? '';

      expect(
        text.startsWith('SET TRANSACTION ISOLATION LEVEL READ COMMITTED;\nSET LOCK_TIMEOUT 1000;\n'),
      ).toBe(true);
      // The first rows, then the other dead rows of their keys among the next 100,000, bounded by @maxRows.
      expect(text).toContain(`WITH firsts AS (\n  SELECT TOP (@batchSize) o.id, o.[key]\n  FROM ${t} AS o\n`);
      expect(text).toContain(`ahead AS (\n  SELECT TOP (100000) o.id, o.[key]\n`);
      expect(text).toContain(
        'WHERE r.through_key <= @maxRows OR (r.lead = r.first_lead AND r.nth <= @maxRows)',
      );
      expect(text).toContain(
        `SELECT o.id, o.[key], (SELECT COUNT(*) FROM firsts) AS taken\nFROM ${t} AS o WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK)\n`,
      );
      expect(text.endsWith('ORDER BY o.id;\nSET LOCK_TIMEOUT -1;')).toBe(true);
    });

    it("adminLockPendingKeyRowsStatement locks the head of each key (its smallest active id: TOP (1), sought by key) by primary key (the claim's resource) without waiting, and answers the keys whose head it could not lock", () => {
      const { text, values } = STATEMENTS.adminLockPendingKeyRowsStatement ?? { text: '', values: {} };

      expect(
        text.startsWith('SET TRANSACTION ISOLATION LEVEL READ COMMITTED;\nSET LOCK_TIMEOUT 1000;\n'),
      ).toBe(true);
      expect(text).toContain(
        `SELECT k.[key] AS held_key\nFROM OPENJSON(@keys) WITH ([key] NVARCHAR(450) '$') AS k\nCROSS APPLY (\n  SELECT TOP (1) o.id\n  FROM ${t} AS o WITH (FORCESEEK)\n  WHERE o.[key] = k.[key] COLLATE Latin1_General_100_BIN2 AND DATALENGTH(o.[key]) = DATALENGTH(k.[key])\n    AND o.state IN (N'pending', N'processing') AND o.[key] IS NOT NULL\n  ORDER BY o.id\n) AS h\nWHERE NOT EXISTS (\n  SELECT 1 FROM ${t} AS r WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK, FORCESEEK)\n  WHERE r.id = h.id AND r.state IN (N'pending', N'processing')\n);`,
      );
      expect(values.keys?.value).toBe('["order-1","order-2"]');
    });

    it('adminTryLockKeysStatement tries the insert lock of each distinct key without waiting and answers every status', () => {
      const { text, values } = STATEMENTS.adminTryLockKeysStatement ?? { text: '', values: {} };
      const { parsed } = checkTsql(text);
      const types = (Array.isArray(parsed.ast) ? parsed.ast : [parsed.ast]).map((s) => (s as Ast).type);

      // The very resource an insert of the key locks, once per distinct key, in order of first appearance.
      expect(Object.values(values).map((v) => v.value)).toEqual([
        outboxKeyLockResource(SCHEMA, 'order-2'),
        outboxKeyLockResource(SCHEMA, 'order-1'),
      ]);
      expect(types).toEqual(['declare', 'declare', 'exec', 'select', 'exec', 'select', 'select']);
      expect(text.split('\n').slice(2, 4)).toEqual([
        "EXEC @status = sys.sp_getapplock @Resource = @resource0, @LockMode = N'Exclusive', @LockOwner = N'Transaction', @LockTimeout = 0;",
        "SELECT @statuses = @statuses + CAST(@status AS NVARCHAR(11)) + N',';",
      ]);
      // No guard: every key is tried, whatever the one before answered, and nothing waits.
      expect(text).not.toContain('IF @status');
      expect(text).not.toContain('@lockTimeoutMs');
      expect(text.endsWith('\nSELECT @statuses AS statuses;')).toBe(true);
      expect(() =>
        adminSql.adminTryLockKeysStatement(
          SCHEMA,
          Array.from({ length: 501 }, (_, i) => `k${i}`),
        ),
      ).toThrow(/at most 500/);
    });

    it('adminKeysInFlightStatement answers each dead keyed row with the smallest processing id of its key', () => {
      const text = STATEMENTS.adminKeysInFlightStatement?.text ?? '';

      expect(text).toContain(
        `CROSS APPLY (\n  SELECT TOP (1) p.id AS processing_id\n  FROM ${t} AS p\n  WHERE p.state = N'processing' AND p.[key] = o.[key] AND DATALENGTH(p.[key]) = DATALENGTH(o.[key])\n  ORDER BY p.id\n) AS f\n`,
      );
      expect(text).toContain("WHERE o.state = N'dead' AND o.[key] IS NOT NULL AND o.topic = @topic");
    });

    it('adminKeysInFlightStatement (inbox) answers each dead row with an aggregate id with the smallest processing id of it', () => {
      const text = STATEMENTS['adminKeysInFlightStatement (inbox)']?.text ?? '';
      const inbox = t.replace('outbox', 'inbox');

      expect(text).toContain('SELECT TOP (@limit) o.id, o.aggregate_id AS [key], f.processing_id');
      expect(text).toContain(
        `CROSS APPLY (\n  SELECT TOP (1) p.id AS processing_id\n  FROM ${inbox} AS p\n  WHERE p.state = N'processing' AND ${inboxClaim.sameAggregate('p', 'o')}\n  ORDER BY p.id\n) AS f\n`,
      );
      expect(text).toContain("WHERE o.state = N'dead' AND o.aggregate_id IS NOT NULL AND o.source = @source");
    });
  });

  describe("the relay's claim keeps the order of one aggregate id (migration 0006)", () => {
    const t = `[${SCHEMA}].[inbox]`;
    const text = STATEMENTS['claimInboxStatement (relay, no payload)']?.text ?? '';
    const TAKEN = 'WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK';

    it('is one transaction that XACT_ABORT rolls back whole: DECLAREs, the window, the earlier rows, the candidates, the count, the rows holding them back, the UPDATE, the answer', () => {
      const { parsed } = checkTsql(text);
      const types = (Array.isArray(parsed.ast) ? parsed.ast : [parsed.ast]).map((st) => (st as Ast).type);

      expect(types).toEqual([
        ...['set', 'set', 'set'],
        ...['declare', 'declare', 'declare', 'declare', 'declare', 'declare'],
        undefined, // BEGIN TRANSACTION
        ...['insert', 'insert', 'insert', 'select', 'select', 'update', 'select'],
        undefined, // COMMIT TRANSACTION
        ...['set', 'set'],
      ]);
      expect(text).toContain('SET LOCK_TIMEOUT 1000;\nSET XACT_ABORT ON;\n');
      expect(text).toContain('\nBEGIN TRANSACTION;\nINSERT INTO @window ');
      expect(text.endsWith('\nCOMMIT TRANSACTION;\nSET XACT_ABORT OFF;\nSET LOCK_TIMEOUT -1;')).toBe(true);
    });

    it('reads the window once, into @window, with a TOP per source in (scheduled_at, id) order: no filter under the TOP', () => {
      expect(text).toContain(
        `INSERT INTO @window (id, scheduled_at, chain, first_id)\nSELECT d.id, d.scheduled_at,\n  CASE WHEN d.aggregate_id IS NULL THEN NULL ELSE MAX(d.id) OVER (PARTITION BY d.source, DATALENGTH(d.source), d.aggregate_id COLLATE Latin1_General_100_BIN2, DATALENGTH(d.aggregate_id)) END,`,
      );
      expect(text).toContain(
        `  SELECT TOP (@perSource) i.id, i.source, i.aggregate_id, i.scheduled_at\n  FROM ${t} AS i ${TAKEN})\n  WHERE i.source = s.source COLLATE Latin1_General_100_BIN2 AND DATALENGTH(i.source) = DATALENGTH(s.source) AND i.state = N'pending' AND i.scheduled_at <= CAST(SYSUTCDATETIME() AS DATETIME2(3))\n  ORDER BY i.scheduled_at, i.id\n) AS d;`,
      );
      // Two taking reads: the window and the heads, each into a table variable; nothing reads a taking CTE.
      expect(text.split(TAKEN).length - 1).toBe(2);
      expect(text).toContain(`INNER JOIN ${t} AS h ${TAKEN}, FORCESEEK) ON h.id = b.id\n`);
      expect(text.match(/^WITH /gm)).toEqual(['WITH ']);
      expect(text).toContain('WITH chosen AS (\n  SELECT TOP (@batchSize) c.id\n  FROM (\n');
      expect(text).toContain('    FROM @candidates AS c\n');
    });

    it('seeks the earlier row of each chain in inbox_active_aggregate: its predicate, a plain = for the seek, then exact, without READPAST', () => {
      expect(text).toContain(
        [
          'CROSS APPLY (',
          '  SELECT TOP (1) e.id',
          `  FROM ${t} AS e`,
          '  WHERE e.source = l.source AND DATALENGTH(e.source) = DATALENGTH(l.source)',
          '    AND e.aggregate_id = l.aggregate_id',
          '    AND e.aggregate_id = l.aggregate_id COLLATE Latin1_General_100_BIN2 AND DATALENGTH(e.aggregate_id) = DATALENGTH(l.aggregate_id)',
          "    AND e.id < l.id AND e.state IN (N'pending', N'processing') AND e.aggregate_id IS NOT NULL",
          '    AND NOT EXISTS (SELECT 1 FROM @window AS o WHERE o.id = e.id)',
          '  ORDER BY e.id',
          ') AS e',
          `INNER JOIN ${t} AS a WITH (FORCESEEK) ON a.id = e.id`,
          'WHERE w.id = w.chain;',
        ].join('\n'),
      );
      // The filter of the migration's index, word for word, so the optimizer can match it.
      const migration = MIGRATIONS.find((m) => m.version === 6)?.sql ?? '';
      expect(migration).toContain("WHERE state IN (N'pending', N'processing') AND aggregate_id IS NOT NULL;");
    });

    it('claims the unblocked window rows and the heads, and counts the rows left blocked but for a row not due yet', () => {
      expect(text).toContain(
        'FROM @window AS w\nLEFT JOIN @earlier AS b ON b.chain = w.chain\nWHERE w.chain IS NULL OR b.id IS NULL OR w.id < b.id\nUNION ALL\n',
      );
      expect(text).toContain(
        "WHERE b.id < b.first_id AND h.state = N'pending' AND h.scheduled_at <= CAST(SYSUTCDATETIME() AS DATETIME2(3));",
      );
      expect(text).toContain(
        "SELECT @blocked = COUNT(*)\nFROM @window AS w\nINNER JOIN @earlier AS b ON b.chain = w.chain\nWHERE b.id < w.id AND (b.state = N'processing' OR b.scheduled_at <= CAST(SYSUTCDATETIME() AS DATETIME2(3)));",
      );
      // Never a later row of a chain without its earlier candidates: each sorts by the earliest of its later ones.
      expect(text).toContain(
        'SELECT c.id, MIN(c.scheduled_at) OVER (PARTITION BY c.chain ORDER BY c.id DESC ROWS UNBOUNDED PRECEDING) AS since',
      );
      expect(text).toContain('  ORDER BY c.since, c.id\n)\nUPDATE i\n');
      // One answer: the rows now holding the token, each with the count and the first with the rows holding the
      // blocked ones back; one row of NULLs with both when none.
      expect(text).toContain(
        'SELECT @blocked AS blocked, CASE WHEN r.claim_order IS NULL OR r.claim_order = 1 THEN @blockedBy END AS blocked_by, r.*\nFROM (SELECT 1 AS one) AS answer\nLEFT JOIN (\n',
      );
      expect(text).toContain('  WHERE i.claim_token = @claimToken\n) AS r ON 1 = 1;');
      expect(text).not.toContain('OUTPUT');
    });

    it.each(['claimInboxStatement', 'claimInboxStatement (takeOverExpired)'])(
      '%s (pull workers) is as it was: no window table, no earlier rows',
      (name) => {
        const pull = STATEMENTS[name]?.text ?? '';
        expect(pull).not.toContain('@window');
        expect(pull).not.toContain(`${t} AS e`);
        expect(pull).toContain('OUTPUT inserted.id, inserted.source, inserted.idempotency_key');
        expect(pull).toContain('inserted.payload');
      },
    );
  });

  it('compares inbox sources exactly: binary collation against OPENJSON text, and equal byte lengths', () => {
    for (const name of ['claimInboxStatement (takeOverExpired)', 'reclaimExpiredInboxStatement']) {
      const text = STATEMENTS[name]?.text ?? '';
      const exact =
        'i.source = s.source COLLATE Latin1_General_100_BIN2 AND DATALENGTH(i.source) = DATALENGTH(s.source)';
      expect(text.split(exact).length - 1).toBe(name === 'reclaimExpiredInboxStatement' ? 1 : 2);
      expect(text).toContain("OPENJSON(@sources) WITH (source NVARCHAR(400) '$') AS s");
    }
    expect(STATEMENTS.selectInboxIdStatement?.text).toContain(
      'AND source_bytes = DATALENGTH(@source) AND idempotency_key_bytes = DATALENGTH(@idempotencyKey)',
    );
  });

  it('fails on a statement broken outside the constructs it sets aside', () => {
    const claim = STATEMENTS.claimOutboxStatement?.text ?? '';
    const broken = [
      claim.replace('GROUP BY a.[key]', 'GROUP a.[key]'),
      claim.replace('ORDER BY c.scheduled_at, c.id\n)', 'ORDER BY c.scheduled_at, c.id\n'),
      claim.replace("SET state = N'processing',", "SET state = N'processing'"),
    ];

    for (const text of broken) expect(() => checkTsql(text)).toThrow();
  });

  it('sets a construct aside only after checking its shape', () => {
    const malformed = ['UPDATE t SET a = 1', 'OUTPUT inserted.id,, inserted.x', 'WHERE id = 1;'].join('\n');
    const badColumn = "SELECT j.id FROM OPENJSON(@items) WITH (id BIGINT '$.id', token GUID '$.t') AS j;";

    expect(() => checkTsql(malformed)).toThrow(/Malformed OUTPUT line/);
    expect(() => checkTsql(badColumn)).toThrow(/Malformed OPENJSON column/);
    expect(() => checkTsql('SELECT COUNT_BIG(DISTINCT t.a) AS n FROM t;')).toThrow(/Malformed COUNT_BIG/);
    expect(() =>
      checkTsql('IF @status > 0 EXEC sys.sp_getapplock @Resource = @r;\nSELECT @status AS status;'),
    ).toThrow(/Malformed IF guard/);
  });

  it('reads the key-lock batch as DECLARE, one sp_getapplock per distinct key, SELECT of the status', () => {
    const text = STATEMENTS.lockOutboxKeysStatement?.text ?? '';
    const { parsed } = checkTsql(text);
    const types = (Array.isArray(parsed.ast) ? parsed.ast : [parsed.ast]).map((s) => (s as Ast).type);

    expect(types).toEqual(['declare', 'exec', 'exec', 'select']);
    expect(text.split('\n')[1]).toBe(
      "IF @status >= 0 EXEC @status = sys.sp_getapplock @Resource = @resource0, @LockMode = N'Exclusive', @LockOwner = N'Transaction', @LockTimeout = @lockTimeoutMs;",
    );
    expect(() => checkTsql(text.replace('@resource0, @LockMode', '@resource0 @LockMode'))).toThrow();
  });

  it.each(SET_ASIDE.map((rule) => [rule.name, rule] as const))(
    'needs "%s" set aside: the grammar rejects or misreads it',
    (name) => {
      const examples: Record<string, string> = {
        [OUTPUT]: 'UPDATE t SET a = 1\nOUTPUT inserted.id\nWHERE id = 1;',
        [TOP]: 'SELECT TOP (@n) t.id FROM t ORDER BY t.id;',
        [OPENJSON_WITH]: "SELECT j.id FROM OPENJSON(@items) WITH (id BIGINT '$.id') AS j;",
        [NAMED_DEFAULT]: "CREATE TABLE t (a NVARCHAR(5) NOT NULL CONSTRAINT t_a_df DEFAULT N'x');",
        [EXEC_STATUS]: 'EXEC @status = sys.sp_getapplock @Resource = @r;',
        [COUNT_BIG]: 'SELECT t.a, COUNT_BIG(*) AS n FROM t GROUP BY t.a;',
        [IF_GUARD]: 'IF @status >= 0 EXEC sys.sp_getapplock @Resource = @r;\nSELECT @status AS status;',
        [RCLOCK]: 'SELECT o.id FROM t AS o WITH (UPDLOCK, READCOMMITTEDLOCK);',
        [NOCHECK]: 'ALTER TABLE [s].[t] WITH NOCHECK ADD CONSTRAINT t_ck CHECK (a > 0);',
        [COMPUTED]: 'ALTER TABLE [s].[t] ADD a_bytes AS DATALENGTH(a) PERSISTED NOT NULL;',
        [RECOMPILE]: "SELECT COUNT(*) AS n FROM t WHERE t.state = N'dead'\nOPTION (RECOMPILE);",
      };
      const example = examples[name] ?? '';

      expect(() => parseTsql(example)).toThrow();
      expect(checkTsql(example).setAside).toEqual([name]);
    },
  );
});

describe('the gauges under PARAMETERIZATION FORCED', () => {
  it.each([
    'adminGaugeCountsStatement',
    'adminGaugeCountsStatement (inbox)',
    'adminOldestPendingStatement',
    'adminOldestPendingStatement (outbox)',
  ])(
    '%s binds no variable and is recompiled at each run, so forced parameterization leaves its literals to match the filtered indexes',
    (name) => {
      const statement = STATEMENTS[name];

      expect(statement?.values).toEqual({});
      expect(statement?.text.endsWith('\nOPTION (RECOMPILE);')).toBe(true);
      expect(statement?.text.match(/OPTION \(RECOMPILE\)/g)).toHaveLength(1);
    },
  );
});

describe('redact erases the message data of one final row, and nothing else', () => {
  it.each([
    [
      'adminRedactStatement',
      'outbox',
      "N'sent', N'dead'",
      "payload = N'null', headers = N'{}', last_error = NULL",
    ],
    [
      'adminRedactStatement (inbox)',
      'inbox',
      "N'processed', N'dead'",
      "payload = N'null', headers = N'{}', last_error = NULL, aggregate_id = NULL, correlation_id = NULL",
    ],
  ])('%s clears only the message data, on the row it checks to be final', (name, table, finals, set) => {
    const { text, values } = STATEMENTS[name] ?? { text: '', values: {} };
    const { parsed } = checkTsql(text);
    const update = first(parsed.ast);

    expect(update.type).toBe('update');
    expect(parsed.tableList).toContain(`update::${SCHEMA}::${table}`);
    expect(text).toContain(`\nSET ${set}\nOUTPUT inserted.id\n`);
    expect(text).toContain(`\nWHERE r.id = @id AND r.state IN (${finals});`);
    // The deduplication memory, the delivery history and the retention clock stay as they are.
    const assigned = (update.set as { column: string }[]).map((column) => column.column).sort();
    expect(assigned).toEqual(
      table === 'outbox'
        ? ['headers', 'last_error', 'payload']
        : ['aggregate_id', 'correlation_id', 'headers', 'last_error', 'payload'],
    );
    expect(values).toEqual({ id: expect.objectContaining({ value: '41' }) });
  });

  it('adminRowStateStatement reads the state of the one row', () => {
    expect(STATEMENTS.adminRowStateStatement?.text).toBe(
      `SELECT o.state FROM [${SCHEMA}].[inbox] AS o WHERE o.id = @id;`,
    );
  });
});

describe('README.md', () => {
  it('lists exactly what the parser could and could not read', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const rows = [
      ...Object.entries(PARSE_TABLE),
      ...MIGRATION_PARSE_TABLE.map(([label, outcome]) => [label, outcome] as const),
      ...MIGRATION_0003_PARSE_TABLE.map(([label, outcome]) => [label, outcome] as const),
    ].map(([name, outcome]) => [
      name,
      outcome.verbatim === 'parsed' ? 'yes' : 'no',
      outcome.setAside.join(', ') || '—',
    ]);
    const section = readme.split('<!-- parse-table -->')[1]?.split('<!-- /parse-table -->')[0] ?? '';
    // The table's rows as cells (the formatter pads them), without its header and separator.
    const table = section
      .split('\n')
      .filter((line) => line.startsWith('|'))
      .slice(2)
      .map((line) =>
        line
          .split('|')
          .slice(1, -1)
          .map((cell) => cell.trim()),
      );

    expect(table).toEqual(rows);
  });
});
