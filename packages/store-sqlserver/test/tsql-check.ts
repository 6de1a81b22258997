/**
 * Parses T-SQL with node-sql-parser (`database: 'transactsql'`) and says how much of a statement it could read.
 *
 * node-sql-parser 5.4's T-SQL grammar lacks some constructs this package uses. Each is listed in `SET_ASIDE`
 * with what it rewrites and why; a rewrite first checks the shape of what it removes with its own strict pattern,
 * so setting a construct aside never hides a malformed one. The rest of the statement is then parsed for real.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Parser } = require('node-sql-parser/build/transactsql') as typeof import('node-sql-parser');
const parser = new Parser();
const OPTIONS = { database: 'transactsql' };

/** What the parser answers for a text that it reads. */
export interface Parsed {
  readonly ast: unknown;
  /** `type::schema::table` entries, e.g. `update::qb_test::outbox`. */
  readonly tableList: readonly string[];
}

/** Parses `text` as node-sql-parser's T-SQL; throws its syntax error. */
export function parseTsql(text: string): Parsed {
  const result = parser.parse(text, OPTIONS) as { ast: unknown; tableList: string[] };
  return { ast: result.ast, tableList: result.tableList };
}

/** One construct the parser cannot read, and how it is set aside. */
export interface SetAside {
  readonly name: string;
  readonly why: string;
  /** The text without the construct; throws when an occurrence does not have the expected shape. */
  readonly apply: (text: string) => string;
}

const OUTPUT_ITEM = String.raw`(?:inserted|deleted)\.(?:\*|\[?[a-z_]+\]?)`;
const OUTPUT_LINE = new RegExp(`^OUTPUT ${OUTPUT_ITEM}(?:, ${OUTPUT_ITEM})*$`);
/** An OUTPUT item computed from the row (the claim's payload left out when large): parsed as a select item. */
const OUTPUT_CASE_ITEM = /^CASE WHEN [^,]+ END AS [a-z_]+$/;

/**
 * Whether `line` is an OUTPUT clause: inserted/deleted columns, or also CASE items, which are then parsed for real
 * as the select list of `SELECT … FROM t AS inserted` (throws the parser's error when they do not parse).
 */
function isOutputLine(line: string): boolean {
  if (OUTPUT_LINE.test(line)) return true;
  if (!line.startsWith('OUTPUT ')) return false;
  const items = line.slice('OUTPUT '.length).split(', ');
  const item = new RegExp(`^${OUTPUT_ITEM}$`);
  if (!items.every((i) => item.test(i) || OUTPUT_CASE_ITEM.test(i))) return false;
  parseTsql(`SELECT ${items.join(', ')} FROM [t].[t] AS inserted;`);
  return true;
}
const OPENJSON_COLUMN =
  /^(?:\[[a-z_]+\]|[a-z_]+) (?:BIGINT|INT|BIT|UNIQUEIDENTIFIER|NVARCHAR\((?:\d+|MAX)\)) '\$(?:\.[A-Za-z_]+)?'$/;

/** The constructs set aside, in the order they are applied. */
export const SET_ASIDE: readonly SetAside[] = [
  {
    name: 'OUTPUT clause',
    why: 'the grammar has no OUTPUT clause (UPDATE/INSERT … OUTPUT inserted.*); CASE items in it are parsed as a select list',
    apply: (text) =>
      text.replace(/^[ \t]*OUTPUT\b[^\n]*\n?/gm, (line) => {
        if (!isOutputLine(line.trim())) throw new Error(`Malformed OUTPUT line: ${line.trim()}`);
        return '';
      }),
  },
  {
    name: 'TOP (@variable)',
    why: 'the grammar accepts only a literal in TOP; `TOP (@n) col` is misread as a call of a function TOP',
    apply: (text) => text.replace(/\bTOP \(@[A-Za-z_]+\)/g, 'TOP (1)'),
  },
  {
    name: 'OPENJSON … WITH (schema)',
    why: 'the grammar reads OPENJSON(@json) but not its WITH (column type path, …) clause',
    apply: (text) =>
      text.replace(/OPENJSON\(([^()]*)\) WITH \(((?:[^()]|\((?:\d+|MAX)\))*)\)/g, (_all, source, columns) => {
        for (const column of String(columns).split(/,\s*/)) {
          if (!OPENJSON_COLUMN.test(column.trim())) throw new Error(`Malformed OPENJSON column: ${column}`);
        }
        return `OPENJSON(${source})`;
      }),
  },
  {
    name: 'CONSTRAINT name DEFAULT',
    why: 'the grammar reads DEFAULT but not a named default constraint',
    apply: (text) => text.replace(/\bCONSTRAINT [a-z_]+ DEFAULT\b/g, 'DEFAULT'),
  },
  {
    name: 'COUNT_BIG(*)',
    why: 'the grammar knows COUNT but not COUNT_BIG, the same aggregate answering BIGINT',
    apply: (text) =>
      text.replace(/\bCOUNT_BIG\b(.{0,3})/g, (_all, after: string) => {
        if (!after.startsWith('(*)')) throw new Error(`Malformed COUNT_BIG: COUNT_BIG${after}`);
        return `COUNT${after}`;
      }),
  },
  {
    name: 'EXEC @status = procedure',
    why: 'the grammar reads EXEC procedure but not the assignment of its return status',
    apply: (text) => text.replace(/\bEXEC @[A-Za-z_]+ = /g, 'EXEC '),
  },
  {
    name: 'IF @status >= 0 guard',
    why: 'the grammar accepts no statement after an IF in the same text; the lock batch guards each sp_getapplock',
    apply: (text) =>
      text.replace(/^IF\b[^\n]*?(?=EXEC (?:@[A-Za-z_]+ = )?sys\.sp_getapplock\b)/gm, (guard) => {
        if (guard !== 'IF @status >= 0 ') throw new Error(`Malformed IF guard: ${guard}`);
        return '';
      }),
  },
  {
    name: 'WITH NOCHECK ADD CONSTRAINT',
    why: 'the grammar reads ALTER TABLE … ADD CONSTRAINT but not WITH NOCHECK (add without checking existing rows)',
    apply: (text) =>
      text.replace(/^(ALTER TABLE \[[a-z_]+\]\.\[[a-z_]+\]) WITH NOCHECK (?=ADD CONSTRAINT )/gm, '$1 '),
  },
  {
    name: 'persisted computed column',
    why: 'the grammar has no computed column (name AS expression PERSISTED); only AS DATALENGTH(column) is used',
    apply: (text) =>
      text.replace(
        /\bADD ([a-z_]+) AS ([^\n;]*?) PERSISTED NOT NULL;/g,
        (_all, name: string, expression: string) => {
          if (!/^DATALENGTH\([a-z_]+\)$/.test(expression)) {
            throw new Error(`Malformed computed column: ${name} AS ${expression}`);
          }
          return `ADD ${name} INT NOT NULL;`;
        },
      ),
  },
  {
    name: 'OPTION (RECOMPILE)',
    why: 'the grammar has no OPTION clause of query hints; the gauges end with exactly OPTION (RECOMPILE) on its own line',
    apply: (text) => {
      const rewritten = text.replace(/\nOPTION \(RECOMPILE\);$/, ';');
      const left = /.{0,30}\bOPTION\b.{0,20}/.exec(rewritten);
      if (left) throw new Error(`Malformed OPTION clause: ${left[0]}`);
      return rewritten;
    },
  },
  {
    name: 'READCOMMITTEDLOCK hint',
    why: 'the grammar knows the READCOMMITTED table hint but not READCOMMITTEDLOCK',
    apply: (text) => {
      // Only inside a WITH (…) list of hints, after at least one other: WITH (UPDLOCK, READCOMMITTEDLOCK, …).
      const rewritten = text.replace(
        /(WITH \((?:[A-Z]+, )+)READCOMMITTEDLOCK(, |(?=\)))/g,
        (_all, list: string, after: string) => (after === ', ' ? list : list.slice(0, -2)),
      );
      const left = /.{0,30}READCOMMITTEDLOCK.{0,10}/.exec(rewritten);
      if (left) throw new Error(`Malformed READCOMMITTEDLOCK hint: ${left[0]}`);
      return rewritten;
    },
  },
];

/** Whether the AST holds a call of a function named TOP: the misreading of `TOP (@n) column`. */
function hasTopFunction(node: unknown): boolean {
  if (Array.isArray(node)) return node.some(hasTopFunction);
  if (typeof node !== 'object' || node === null) return false;
  const record = node as Record<string, unknown>;
  if (record.type === 'function') {
    const names = (record.name as { name?: { value?: unknown }[] } | undefined)?.name ?? [];
    if (names.some((n) => String(n.value).toUpperCase() === 'TOP')) return true;
  }
  return Object.values(record).some(hasTopFunction);
}

/** How a statement fared. */
export interface Outcome {
  /** `parsed`: read as written. `misparsed`: accepted but misread. `failed`: a syntax error. */
  readonly verbatim: 'parsed' | 'misparsed' | 'failed';
  /** Names of the constructs that had to be set aside for the rest to parse (none when verbatim parsed). */
  readonly setAside: readonly string[];
  /** The parse of the text with those constructs set aside (of the text itself when verbatim parsed). */
  readonly parsed: Parsed;
}

/**
 * Parses `text` as written; when that fails or misreads, sets aside every construct of {@link SET_ASIDE} that
 * occurs in it and parses the rest. Throws when even that fails.
 */
export function checkTsql(text: string): Outcome {
  let verbatim: Outcome['verbatim'];
  try {
    const parsed = parseTsql(text);
    if (!hasTopFunction(parsed.ast)) return { verbatim: 'parsed', setAside: [], parsed };
    verbatim = 'misparsed';
  } catch {
    verbatim = 'failed';
  }
  let current = text;
  const used: string[] = [];
  for (const rule of SET_ASIDE) {
    const next = rule.apply(current);
    if (next === current) continue;
    current = next;
    used.push(rule.name);
  }
  const parsed = parseTsql(current);
  if (hasTopFunction(parsed.ast)) throw new Error('Still misread after setting TOP (@n) aside');
  return { verbatim, setAside: used, parsed };
}

/**
 * The statements of a script, split after each `;` that ends a line. The grammar accepts no statement after an
 * IF statement in the same text, so a migration is parsed one statement at a time. Leading comment lines are
 * dropped, and so are pieces that hold nothing else.
 */
export function splitStatements(script: string): string[] {
  return script
    .split(/;[ \t]*$/m)
    .map((piece) => piece.replace(/^(?:\s*--[^\n]*\n)+/, '').trim())
    .filter((piece) => piece.replace(/--[^\n]*/g, '').trim().length > 0)
    .map((piece) => `${piece};`);
}
