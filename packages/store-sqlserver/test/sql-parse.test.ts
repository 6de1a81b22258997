/**
 * Every statement of this package, and the 0001 migration, through a real T-SQL parser (node-sql-parser,
 * `database: 'transactsql'`). No SQL Server runs here, so this is the syntax check; the contract suite in
 * test/contract runs the statements against a server where one is available. What the parser could not read is
 * recorded in PARSE_TABLE, and README.md repeats that table (checked at the end).
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
import { renderMigration, splitBatches } from '../src/migrator.ts';
import * as outboxClaim from '../src/outbox-claim.ts';
import * as outboxSql from '../src/outbox-sql.ts';
import * as settings from '../src/settings.ts';
import { SCHEMA, STATEMENTS } from './statements.ts';
import { checkTsql, type Outcome, parseTsql, SET_ASIDE, splitStatements } from './tsql-check.ts';

const OPENJSON_WITH = 'OPENJSON … WITH (schema)';
const OUTPUT = 'OUTPUT clause';
const TOP = 'TOP (@variable)';
const NAMED_DEFAULT = 'CONSTRAINT name DEFAULT';
const EXEC_STATUS = 'EXEC @status = procedure';
const COUNT_BIG = 'COUNT_BIG(*)';
const IF_GUARD = 'IF @status >= 0 guard';
const RCLOCK = 'READCOMMITTEDLOCK hint';
const NOCHECK = 'WITH NOCHECK ADD CONSTRAINT';
const COMPUTED = 'persisted computed column';

/** What node-sql-parser 5.4 made of each statement: read as written, or only with constructs set aside. */
const PARSE_TABLE: Readonly<Record<string, Pick<Outcome, 'verbatim' | 'setAside'>>> = {
  insertOutboxStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  lockOutboxKeysStatement: { verbatim: 'failed', setAside: [EXEC_STATUS, IF_GUARD] },
  claimOutboxStatement: { verbatim: 'failed', setAside: [OUTPUT, TOP, RCLOCK] },
  markOutboxSentStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  retryOutboxStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  markOutboxDeadStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  releaseOutboxStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  reclaimExpiredOutboxStatement: { verbatim: 'failed', setAside: [OUTPUT, TOP, RCLOCK] },
  getOutboxStatement: { verbatim: 'parsed', setAside: [] },
  insertInboxStatement: { verbatim: 'failed', setAside: [OUTPUT] },
  'insertInboxStatement (dead)': { verbatim: 'failed', setAside: [OUTPUT] },
  selectInboxIdStatement: { verbatim: 'parsed', setAside: [] },
  claimInboxStatement: { verbatim: 'failed', setAside: [OUTPUT, TOP, OPENJSON_WITH, RCLOCK] },
  'claimInboxStatement (takeOverExpired)': {
    verbatim: 'failed',
    setAside: [OUTPUT, TOP, OPENJSON_WITH, RCLOCK],
  },
  'claimInboxStatement (relay, no payload)': {
    verbatim: 'failed',
    setAside: [OUTPUT, TOP, OPENJSON_WITH, RCLOCK],
  },
  completeInboxStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  forwardOutboxStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  retryInboxStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  giveUpInboxStatement: { verbatim: 'failed', setAside: [OUTPUT, OPENJSON_WITH] },
  reclaimExpiredInboxStatement: { verbatim: 'failed', setAside: [OUTPUT, TOP, OPENJSON_WITH, RCLOCK] },
  getInboxStatement: { verbatim: 'parsed', setAside: [] },
  adminStateCountsStatement: { verbatim: 'failed', setAside: [COUNT_BIG] },
  adminOldestPendingStatement: { verbatim: 'parsed', setAside: [] },
  adminDeadGroupsStatement: { verbatim: 'failed', setAside: [TOP, COUNT_BIG] },
  adminNextDueStatement: { verbatim: 'parsed', setAside: [] },
  'adminNextDueStatement (inbox, sources)': { verbatim: 'failed', setAside: [OPENJSON_WITH] },
  adminListStatement: { verbatim: 'misparsed', setAside: [TOP] },
  'adminListStatement (inbox, Failed, first page)': { verbatim: 'misparsed', setAside: [TOP] },
  adminRequeuePreviewStatement: { verbatim: 'failed', setAside: [TOP, OPENJSON_WITH, COUNT_BIG] },
  adminRequeueStatement: { verbatim: 'failed', setAside: [OUTPUT, TOP, RCLOCK] },
  'adminRequeueStatement (inbox, ids)': {
    verbatim: 'failed',
    setAside: [OUTPUT, TOP, OPENJSON_WITH, RCLOCK],
  },
  adminReplayStatement: { verbatim: 'failed', setAside: [OUTPUT] },
  adminPurgeStatement: { verbatim: 'failed', setAside: [TOP, RCLOCK] },
  acquireMigrationLock: { verbatim: 'failed', setAside: [EXEC_STATUS] },
  createSchemaIfMissing: { verbatim: 'parsed', setAside: [] },
  createSchemaMigrationsIfMissing: { verbatim: 'failed', setAside: [NAMED_DEFAULT] },
  selectAppliedVersions: { verbatim: 'parsed', setAside: [] },
  insertAppliedVersion: { verbatim: 'parsed', setAside: [] },
  readServerSettingsStatement: { verbatim: 'parsed', setAside: [] },
};

/** The statements of migration 0001, in file order, as PARSE_TABLE rows. */
const MIGRATION_PARSE_TABLE: readonly (readonly [string, Pick<Outcome, 'verbatim' | 'setAside'>])[] = [
  ['0001: IF SCHEMA_ID … EXEC(CREATE SCHEMA)', { verbatim: 'parsed', setAside: [] }],
  ['0001: CREATE TABLE outbox', { verbatim: 'failed', setAside: [NAMED_DEFAULT] }],
  ['0001: CREATE INDEX outbox_due_unkeyed', { verbatim: 'parsed', setAside: [] }],
  ['0001: CREATE INDEX outbox_active_key', { verbatim: 'parsed', setAside: [] }],
  ['0001: CREATE INDEX outbox_lease', { verbatim: 'parsed', setAside: [] }],
  ['0001: CREATE INDEX outbox_state_updated', { verbatim: 'parsed', setAside: [] }],
  ['0001: CREATE TABLE inbox', { verbatim: 'failed', setAside: [NAMED_DEFAULT] }],
  ['0001: CREATE INDEX inbox_due', { verbatim: 'parsed', setAside: [] }],
  ['0001: CREATE INDEX inbox_lease', { verbatim: 'parsed', setAside: [] }],
  ['0001: CREATE INDEX inbox_state_updated', { verbatim: 'parsed', setAside: [] }],
];

/** Statement functions of the *-sql.ts modules, the claim, dedupe and lease modules and the migrator (everything exported that is not a helper). */
const HELPERS = new Set([
  'clampDelayMs',
  'utcNowPlus',
  'jsonParam',
  'claimJson',
  'outboxMessagesJson',
  'statementRows',
  'isSource',
  'createOutboxClaim',
  'claimInboxRows',
  'storeInboxRow',
  'reclaimExpiredOutbox',
  'reclaimExpiredInbox',
  'checkServerSettings',
  'renderMigration',
  'splitBatches',
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

type Ast = Record<string, unknown>;
const first = (ast: unknown): Ast => (Array.isArray(ast) ? ast[ast.length - 1] : ast) as Ast;

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
        if (schema === 'null') expect(['o', 'i', 'b', 'r', 'due', 'chosen', 'expired']).toContain(table);
        else if (schema === 'sys') expect(['databases', 'triggers']).toContain(table);
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
      "WHERE o.state = N'pending' AND o.scheduled_at <= CAST(SYSUTCDATETIME() AS DATETIME2(3));",
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
      'reclaimExpiredInboxStatement',
      "WHERE b.state = N'processing' AND b.lease_until < CAST(SYSUTCDATETIME() AS DATETIME2(3));",
    ],
  ])('%s re-checks in its UPDATE the whole predicate its CTE chose by', (name, where) => {
    expect(STATEMENTS[name]?.text).toContain(`\n${where}\n`);
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
      };
      const example = examples[name] ?? '';

      expect(() => parseTsql(example)).toThrow();
      expect(checkTsql(example).setAside).toEqual([name]);
    },
  );
});

describe('the T-SQL parse check of migration 0001', () => {
  const batches = splitBatches(renderMigration(MIGRATIONS[0]?.sql ?? '', SCHEMA));
  const statements = splitStatements(batches[0] ?? '');

  it('is one batch of ten statements, each parsing as MIGRATION_PARSE_TABLE records', () => {
    expect(batches).toHaveLength(1);
    expect(statements).toHaveLength(MIGRATION_PARSE_TABLE.length);
    for (const [index, statement] of statements.entries()) {
      const outcome = checkTsql(statement);
      const [label, expected] = MIGRATION_PARSE_TABLE[index] ?? [];
      expect({ label, verbatim: outcome.verbatim, setAside: outcome.setAside }).toEqual({
        label,
        ...expected,
      });
    }
  });

  /** [column, type, length, nullable] per SCHEMA.md's SQL Server column. */
  const OUTBOX: readonly (readonly [string, string, number | 'max' | undefined, boolean])[] = [
    ['id', 'BIGINT', undefined, false],
    ['topic', 'NVARCHAR', 400, false],
    ['key', 'NVARCHAR', 450, true],
    ['payload', 'NVARCHAR', 'max', false],
    ['headers', 'NVARCHAR', 'max', false],
    ['state', 'NVARCHAR', 50, false],
    ['attempt', 'INT', undefined, false],
    ['max_attempts', 'INT', undefined, false],
    ['scheduled_at', 'DATETIME2', 3, false],
    ['claim_token', 'UNIQUEIDENTIFIER', undefined, true],
    ['lease_until', 'DATETIME2', 3, true],
    ['created_at', 'DATETIME2', 3, false],
    ['updated_at', 'DATETIME2', 3, false],
    ['sent_at', 'DATETIME2', 3, true],
    ['last_error', 'NVARCHAR', 'max', true],
    ['destination', 'NVARCHAR', 200, true],
  ];
  const INBOX: typeof OUTBOX = [
    ['id', 'BIGINT', undefined, false],
    ['source', 'NVARCHAR', 200, false],
    ['idempotency_key', 'NVARCHAR', 600, false],
    ['event_type', 'NVARCHAR', 400, true],
    ['aggregate_id', 'NVARCHAR', 450, true],
    ['correlation_id', 'NVARCHAR', 200, true],
    ['payload', 'NVARCHAR', 'max', false],
    ['headers', 'NVARCHAR', 'max', false],
    ['state', 'NVARCHAR', 50, false],
    ['attempt', 'INT', undefined, false],
    ['max_attempts', 'INT', undefined, false],
    ['scheduled_at', 'DATETIME2', 3, false],
    ['claim_token', 'UNIQUEIDENTIFIER', undefined, true],
    ['lease_until', 'DATETIME2', 3, true],
    ['received_at', 'DATETIME2', 3, false],
    ['updated_at', 'DATETIME2', 3, false],
    ['processed_at', 'DATETIME2', 3, true],
    ['last_error', 'NVARCHAR', 'max', true],
  ];

  function columnsOf(table: string) {
    const statement = statements.find((s) => s.startsWith(`CREATE TABLE [${SCHEMA}].[${table}]`)) ?? '';
    const ast = first(checkTsql(statement).parsed.ast);
    const definitions = ast.create_definitions as Ast[];
    const columns = definitions
      .filter((d) => d.resource === 'column')
      .map((d) => {
        const definition = d.definition as { dataType: string; length?: number | string; scale?: number };
        const nullable = (d.nullable as { type: string } | undefined)?.type !== 'not null';
        const length = definition.length ?? definition.scale;
        return [(d.column as { column: string }).column, definition.dataType, length, nullable] as const;
      });
    const constraints = definitions.filter((d) => d.resource === 'constraint');
    return { ast, columns, constraints, definitions };
  }

  it.each([
    ['outbox', OUTBOX],
    ['inbox', INBOX],
  ] as const)('declares the %s columns of SCHEMA.md', (table, expected) => {
    const { ast, columns } = columnsOf(table);

    expect(ast.table).toEqual([expect.objectContaining({ db: SCHEMA, table })]);
    expect(columns).toEqual(expected);
  });

  it('makes id an IDENTITY(1, 1) clustered primary key and inbox (source, idempotency_key) unique', () => {
    for (const table of ['outbox', 'inbox']) {
      const { definitions, constraints } = columnsOf(table);
      const id = definitions.find((d) => (d.column as { column?: string } | undefined)?.column === 'id');
      expect(JSON.stringify(id?.auto_increment)).toContain('"identity"');
      expect(constraints).toContainEqual(
        expect.objectContaining({ constraint: `${table}_pkey`, constraint_type: 'primary key' }),
      );
    }
    const unique = columnsOf('inbox').constraints.find(
      (c) => c.constraint === 'inbox_source_idempotency_key_uq',
    );
    expect(JSON.stringify(unique?.definition)).toBe(
      JSON.stringify([
        { type: 'column_ref', table: null, db: null, schema: null, column: 'source', collate: null },
        { type: 'column_ref', table: null, db: null, schema: null, column: 'idempotency_key', collate: null },
      ]),
    );
  });

  it('checks the JSON columns with ISJSON and max_attempts > 0', () => {
    for (const table of ['outbox', 'inbox']) {
      const { definitions, constraints } = columnsOf(table);
      const checks = [...definitions.map((d) => d.check), ...constraints].filter(Boolean);
      const named = checks.map((c) => (c as { constraint?: string }).constraint);
      expect(named).toEqual(
        expect.arrayContaining([
          `${table}_payload_json_ck`,
          `${table}_headers_json_ck`,
          `${table}_max_attempts_ck`,
        ]),
      );
      expect(JSON.stringify(checks).match(/"ISJSON"/g)).toHaveLength(2);
    }
  });

  /** [index, table, columns, filtered] as SCHEMA.md lists them. */
  const INDEXES = [
    ['outbox_due_unkeyed', 'outbox', ['scheduled_at', 'id'], "state = N'pending' AND [key] IS NULL"],
    [
      'outbox_active_key',
      'outbox',
      ['key', 'id'],
      "state IN (N'pending', N'processing') AND [key] IS NOT NULL",
    ],
    ['outbox_lease', 'outbox', ['lease_until'], "state = N'processing'"],
    ['outbox_state_updated', 'outbox', ['state', 'updated_at'], undefined],
    ['inbox_due', 'inbox', ['source', 'scheduled_at', 'id'], "state = N'pending'"],
    ['inbox_lease', 'inbox', ['lease_until'], "state = N'processing'"],
    ['inbox_state_updated', 'inbox', ['state', 'updated_at'], undefined],
  ] as const;

  it.each(INDEXES)(
    'creates index %s on %s (%s), filtered as SCHEMA.md says',
    (name, table, columns, filter) => {
      const statement = statements.find((s) => s.startsWith(`CREATE INDEX ${name} `)) ?? '';
      const ast = first(checkTsql(statement).parsed.ast);

      expect(ast.index).toBe(name);
      expect(ast.table).toEqual(expect.objectContaining({ db: SCHEMA, table }));
      expect((ast.index_columns as { column: string }[]).map((c) => c.column)).toEqual(columns);
      expect(ast.where === null || ast.where === undefined).toBe(filter === undefined);
      if (filter) expect(statement.replace(/\s+/g, ' ')).toContain(`WHERE ${filter};`);
    },
  );
});

/** The statements of migration 0003, batch by batch in file order, as PARSE_TABLE rows. */
const MIGRATION_0003_PARSE_TABLE: readonly (readonly [string, Pick<Outcome, 'verbatim' | 'setAside'>])[] = [
  ['0003: DROP INDEX outbox_due_unkeyed', { verbatim: 'parsed', setAside: [] }],
  ['0003: DROP INDEX outbox_active_key', { verbatim: 'parsed', setAside: [] }],
  ['0003: DROP CONSTRAINT inbox_source_idempotency_key_uq', { verbatim: 'parsed', setAside: [] }],
  ['0003: DROP INDEX inbox_due', { verbatim: 'parsed', setAside: [] }],
  ['0003: DROP INDEX inbox_lease', { verbatim: 'parsed', setAside: [] }],
  ['0003: ALTER COLUMN outbox.topic COLLATE', { verbatim: 'parsed', setAside: [] }],
  ['0003: ALTER COLUMN outbox.key COLLATE', { verbatim: 'parsed', setAside: [] }],
  ['0003: ALTER COLUMN inbox.source COLLATE', { verbatim: 'parsed', setAside: [] }],
  ['0003: ALTER COLUMN inbox.idempotency_key COLLATE', { verbatim: 'parsed', setAside: [] }],
  ['0003: ADD inbox.source_bytes', { verbatim: 'failed', setAside: [COMPUTED] }],
  ['0003: ADD inbox.idempotency_key_bytes', { verbatim: 'failed', setAside: [COMPUTED] }],
  ['0003: DROP CONSTRAINT outbox_payload_json_ck', { verbatim: 'parsed', setAside: [] }],
  ['0003: DROP CONSTRAINT inbox_payload_json_ck', { verbatim: 'parsed', setAside: [] }],
  ['0003: ADD CONSTRAINT outbox_payload_json_ck', { verbatim: 'failed', setAside: [NOCHECK] }],
  ['0003: ADD CONSTRAINT inbox_payload_json_ck', { verbatim: 'failed', setAside: [NOCHECK] }],
  ['0003: ADD CONSTRAINT inbox_source_idempotency_key_uq', { verbatim: 'parsed', setAside: [] }],
  ['0003: CREATE INDEX outbox_due_unkeyed', { verbatim: 'parsed', setAside: [] }],
  ['0003: CREATE INDEX outbox_active_key', { verbatim: 'parsed', setAside: [] }],
  ['0003: CREATE INDEX inbox_due', { verbatim: 'parsed', setAside: [] }],
  ['0003: CREATE INDEX inbox_lease', { verbatim: 'parsed', setAside: [] }],
];

describe('the T-SQL parse check of migration 0003', () => {
  const sql = MIGRATIONS.find((m) => m.version === 3)?.sql ?? '';
  const batches = splitBatches(renderMigration(sql, SCHEMA));
  const statements = batches.flatMap(splitStatements);
  const flat = (text: string) => text.replace(/\s+/g, ' ');

  it('is three batches (drops; column changes; new constraints and indexes), each statement parsing as recorded', () => {
    expect(batches).toHaveLength(3);
    expect(statements).toHaveLength(MIGRATION_0003_PARSE_TABLE.length);
    for (const [index, statement] of statements.entries()) {
      const outcome = checkTsql(statement);
      const [label, expected] = MIGRATION_0003_PARSE_TABLE[index] ?? [];
      expect({ label, verbatim: outcome.verbatim, setAside: outcome.setAside }).toEqual({
        label,
        ...expected,
      });
    }
  });

  it.each([
    ['outbox', 'topic', 'NVARCHAR(400)', 'NOT NULL'],
    ['outbox', '[key]', 'NVARCHAR(450)', 'NULL'],
    ['inbox', 'source', 'NVARCHAR(200)', 'NOT NULL'],
    ['inbox', 'idempotency_key', 'NVARCHAR(600)', 'NOT NULL'],
  ])(
    'gives %s.%s the binary collation Latin1_General_100_BIN2, keeping its type and nullability',
    (table, column, type, nullable) => {
      expect(statements).toContain(
        `ALTER TABLE [${SCHEMA}].[${table}] ALTER COLUMN ${column} ${type} COLLATE Latin1_General_100_BIN2 ${nullable};`,
      );
    },
  );

  it('makes trailing spaces count in the inbox unique key through persisted byte lengths', () => {
    expect(statements).toContain(
      `ALTER TABLE [${SCHEMA}].[inbox] ADD source_bytes AS DATALENGTH(source) PERSISTED NOT NULL;`,
    );
    expect(statements).toContain(
      `ALTER TABLE [${SCHEMA}].[inbox] ADD idempotency_key_bytes AS DATALENGTH(idempotency_key) PERSISTED NOT NULL;`,
    );
    expect(statements.map(flat)).toContain(
      `ALTER TABLE [${SCHEMA}].[inbox] ADD CONSTRAINT inbox_source_idempotency_key_uq UNIQUE NONCLUSTERED (source, idempotency_key, source_bytes, idempotency_key_bytes);`,
    );
  });

  it.each(['outbox', 'inbox'])(
    'checks that a %s payload is exactly one JSON value, leaving stored rows alone',
    (table) => {
      expect(statements.map(flat)).toContain(
        `ALTER TABLE [${SCHEMA}].[${table}] WITH NOCHECK ADD CONSTRAINT ${table}_payload_json_ck CHECK (ISJSON(N'[' + payload + N']') = 1 AND ISJSON(N'{"v":' + payload + N'}') = 1);`,
      );
    },
  );

  it('admits exactly one JSON value with its payload check (JSON.parse standing in for ISJSON)', () => {
    // The wraps as the migration writes them: ISJSON(N'<prefix>' + payload + N'<suffix>') = 1, all of which must hold.
    const check = /outbox_payload_json_ck\s+CHECK \((.*)\);/.exec(sql)?.[1] ?? '';
    const wraps = [...check.matchAll(/ISJSON\(N'([^']*)' \+ payload \+ N'([^']*)'\) = 1/g)].map((m) => [
      m[1] ?? '',
      m[2] ?? '',
    ]);
    // ISJSON without a type constraint accepts a JSON object or array (every wrap makes one).
    const isjson = (text: string) => {
      try {
        const value: unknown = JSON.parse(text);
        return typeof value === 'object' && value !== null;
      } catch {
        return false;
      }
    };
    const passes = (payload: string) =>
      wraps.every(([prefix, suffix]) => isjson(`${prefix}${payload}${suffix}`));

    expect(wraps).toEqual([
      ['[', ']'],
      ['{"v":', '}'],
    ]);
    for (const one of ['{"a":1}', '[1,2]', '"x"', '""', '0', '-1.5e3', 'true', 'null', ' 7 ', '{}', '[]']) {
      expect(passes(one), one).toBe(true);
    }
    for (const notOne of [
      '',
      ' ',
      '1,2',
      '1,"a":2',
      '"a":1',
      '1},{"a":2',
      '[1],[2]',
      '1]',
      '{"a":1',
      'nul',
      ',',
    ]) {
      expect(passes(notOne), notOne).toBe(false);
    }
    // 0001's check alone let these through.
    expect(['', '1,2'].every((p) => isjson(`[${p}]`))).toBe(true);
  });

  it('builds again every index and constraint it dropped, and keys inbox_lease by (source, lease_until)', () => {
    const dropped = statements
      .map((s) => /^(?:DROP INDEX|ALTER TABLE \S+ DROP CONSTRAINT) ([a-z_]+)/.exec(s)?.[1])
      .filter(Boolean);
    const built = statements
      .map((s) => /^(?:CREATE INDEX|ALTER TABLE \S+ (?:WITH NOCHECK )?ADD CONSTRAINT) ([a-z_]+)/.exec(s)?.[1])
      .filter(Boolean);

    expect([...built].sort()).toEqual([...dropped].sort());
    expect(statements.map(flat)).toContain(
      `CREATE INDEX inbox_lease ON [${SCHEMA}].[inbox] (source, lease_until) WHERE state = N'processing';`,
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
