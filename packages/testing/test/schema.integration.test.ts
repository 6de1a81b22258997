import pg from 'pg';
import { afterAll, describe, expect, it, vi } from 'vitest';
import {
  assertSchemaName,
  dropPostgresSchemaStatement,
  dropSqlServerSchemaStatement,
  freshSchemaName,
  settleSchema,
  useSchema,
} from '../src/schema.ts';
import { findPostgres } from '../src/services.ts';

describe('freshSchemaName', () => {
  it('gives unique names t_<prefix>_<random> that both databases accept', () => {
    const names = Array.from({ length: 1_000 }, () => freshSchemaName('store_pg'));

    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name).toMatch(/^t_store_pg_[0-9a-f]{10}$/);
  });

  it('lower-cases the prefix, replaces what is not [a-z0-9_] and stays within 63 characters', () => {
    const name = freshSchemaName(`Store-PG ${'x'.repeat(100)}`);

    expect(name).toMatch(/^t_store_pg_x+_[0-9a-f]{10}$/);
    expect(name.length).toBeLessThanOrEqual(63);
  });
});

describe('schema statements', () => {
  it.each(['a;drop schema public', '1abc', 'x'.repeat(64), 'quo"te', ''])('refuse the name %j', (name) => {
    expect(() => assertSchemaName(name)).toThrow('Not a valid schema name');
    expect(() => dropPostgresSchemaStatement(name)).toThrow();
    expect(() => dropSqlServerSchemaStatement(name)).toThrow();
  });

  it('build the SQL Server DROP list with STRING_AGG, never with SELECT @sql += … (undocumented across rows)', () => {
    const { text } = dropSqlServerSchemaStatement('t_x_0123456789');

    expect(text).not.toMatch(/SELECT\s+@sql\s*\+?=/);
    expect(text.match(/STRING_AGG\(CAST\(/g)).toHaveLength(7);
    for (const from of [
      'sys.foreign_keys',
      'sys.views',
      'sys.procedures',
      'sys.objects',
      'sys.tables',
      'sys.sequences',
      'sys.types',
    ]) {
      expect(text).toContain(`FROM ${from} AS`);
    }
    expect(text.indexOf('DROP CONSTRAINT')).toBeLessThan(text.indexOf("N'DROP TABLE '"));
    expect(text).toContain("IF SCHEMA_ID(@schema) IS NOT NULL SET @sql = @sql + N'DROP SCHEMA '");
  });

  it('pass the SQL Server schema name as a parameter, never in the text', () => {
    const { text, values } = dropSqlServerSchemaStatement('t_x_0123456789');

    expect(values).toEqual({ schema: 't_x_0123456789' });
    expect(text).not.toContain('t_x_0123456789');
  });
});

describe('settleSchema', () => {
  it('drops the schema when nothing failed', async () => {
    const drop = vi.fn(async () => {});

    await settleSchema('t_a_0000000000', false, drop);

    expect(drop).toHaveBeenCalledWith('t_a_0000000000');
  });

  it('keeps the schema and names it when a test failed', async () => {
    const drop = vi.fn(async () => {});
    const info = vi.spyOn(console, 'info').mockImplementation(() => {});

    await settleSchema('t_a_0000000000', true, drop);

    expect(drop).not.toHaveBeenCalled();
    expect(info).toHaveBeenCalledWith(expect.stringContaining('keeping schema t_a_0000000000'));
    info.mockRestore();
  });
});

const postgres = await findPostgres();
if (postgres.provider !== 'postgres') {
  console.info(`[schema.test] useSchema on a server: skipped — ${postgres.via}`);
}

describe.runIf(postgres.provider === 'postgres')('useSchema on PostgreSQL', () => {
  const pool = new pg.Pool({ connectionString: postgres.url, max: 1 });
  const exists = async (name: string) =>
    (await pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [name])).rowCount === 1;
  // Registered before useSchema, so it runs after useSchema's own afterAll (hooks unwind like a stack).
  afterAll(async () => {
    try {
      expect(await exists(schema.name)).toBe(false);
    } finally {
      await pool.end();
    }
  });
  const schema = useSchema('schema_helper', {
    async drop(name) {
      const { text, values } = dropPostgresSchemaStatement(name);
      await pool.query(text, values);
    },
  });

  it('gives the file a schema of its own that the file can create and use', async () => {
    await pool.query(`CREATE SCHEMA "${schema.name}"`);
    await pool.query(`CREATE TABLE "${schema.name}".probe (id int)`);

    expect(await exists(schema.name)).toBe(true);
    expect(schema.failed).toBe(false);
  });
});
