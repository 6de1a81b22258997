import { ConfigError } from '@queuebox/core';
import { describe, expect, it } from 'vitest';
import { parseConnectionString, parseSqlServerUrl } from '../src/connection-string.ts';

function configError(run: () => unknown): ConfigError {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('sqlserver:// URLs', () => {
  it('reads user, password, host, port and database', () => {
    const config = parseSqlServerUrl('sqlserver://app:s3cret@db.example.com:14330/orders');

    expect(config).toMatchObject({
      server: 'db.example.com',
      port: 14330,
      user: 'app',
      password: 's3cret',
      database: 'orders',
      options: { encrypt: true, trustServerCertificate: false, appName: 'queuebox' },
    });
  });

  it('accepts mssql:// too, and defaults the port to 1433 and leaves the database to the login', () => {
    const config = parseConnectionString('mssql://sa@localhost');

    expect(config).toMatchObject({ server: 'localhost', port: 1433, user: 'sa' });
    expect(config.database).toBeUndefined();
    expect(config.password).toBeUndefined();
  });

  it('percent-decodes the user, the password and the database', () => {
    const config = parseSqlServerUrl('sqlserver://DOMAIN%5Cuser:p%40ss%3Aw%2Frd@host/my%20db');

    expect(config).toMatchObject({ user: 'DOMAIN\\user', password: 'p@ss:w/rd', database: 'my db' });
  });

  it('reads an IPv6 host without its brackets', () => {
    expect(parseSqlServerUrl('sqlserver://sa:x@[::1]:1433/db').server).toBe('::1');
  });

  it('reads the known parameters without regard to case', () => {
    const config = parseSqlServerUrl(
      'sqlserver://sa:x@host/db?Encrypt=false&TRUSTSERVERCERTIFICATE=yes&instanceName=SQLEXPRESS' +
        '&applicationName=relay&connectTimeout=5000&requestTimeout=60000',
    );

    expect(config).toMatchObject({
      connectionTimeout: 5000,
      requestTimeout: 60000,
      options: { encrypt: false, trustServerCertificate: true, instanceName: 'SQLEXPRESS', appName: 'relay' },
    });
  });

  it('takes the database from ?database= when the path has none', () => {
    expect(parseSqlServerUrl('sqlserver://sa:x@host?database=orders').database).toBe('orders');
  });

  it.each([
    ['sqlserver://sa:x@host/db?encrypt=maybe', /encrypt=maybe is not a boolean/],
    ['sqlserver://sa:x@host/db?requestTimeout=10s', /requestTimeout=10s is not a whole number/],
    ['sqlserver://sa:x@host/db?encrpyt=true', /unknown URL parameter encrpyt/],
    ['sqlserver://sa:x@host/a?database=b', /database is named twice/],
    ['sqlserver://sa:x@host/a/b', /is not a database name/],
    ['sqlserver:///db', /names no host/],
    ['postgres://sa:x@host/db', /expected a sqlserver:\/\/ URL/],
    ['jdbc:sqlserver://host:1433;databaseName=db', /JDBC connection strings are not supported/],
    ['Database=db;User Id=sa', /names no server/],
    ['just words', /expected a sqlserver:\/\/ URL or an ADO.NET/],
  ])('refuses %s with a ConfigError on database.url', (url, message) => {
    const error = configError(() => parseConnectionString(url));

    expect(error.issues).toEqual([{ path: 'database.url', message: expect.stringMatching(message) }]);
  });

  it('never repeats the password in an error', () => {
    const error = configError(() => parseConnectionString('sqlserver://sa:Hunter2Secret@host/db?bogus=1'));

    expect(error.message).not.toContain('Hunter2Secret');
  });
});

describe('ADO.NET connection strings', () => {
  it('are read by mssql’s own parser', () => {
    const config = parseConnectionString(
      'Server=tcp:db.example.com,14330;Database=orders;User Id=app;Password=s3cret;Encrypt=true;TrustServerCertificate=true',
    );

    expect(config).toMatchObject({
      server: 'db.example.com',
      port: 14330,
      database: 'orders',
      user: 'app',
      password: 's3cret',
      options: { encrypt: true, trustServerCertificate: true, appName: 'queuebox' },
    });
  });

  it('never turn on implicit transactions (mssql reads .NET’s default Transaction Binding=Implicit Unbind so)', () => {
    const config = parseConnectionString(
      'Server=db;Database=app;User Id=u;Password=p;Transaction Binding=Implicit Unbind',
    );

    expect(config.options?.enableImplicitTransactions).toBe(false);
  });

  it.each([
    ['UseUTC=false', 'UseUTC=false'],
    ['Stream=true', 'Stream=true'],
  ])('refuse %s, which the store cannot run under', (setting, name) => {
    const error = configError(() =>
      parseConnectionString(`Server=db;Database=app;Password=s3cret;${setting}`),
    );

    expect(error.issues[0]?.message).toContain(name);
    expect(JSON.stringify(error.issues)).not.toContain('s3cret');
  });

  it('accept UseUTC=true and Stream=false', () => {
    const config = parseConnectionString('Server=db;Database=app;UseUTC=true;Stream=false');

    expect([config.options?.useUTC, config.stream]).toEqual([true, false]);
  });

  it('keep a named instance', () => {
    const config = parseConnectionString(
      'Data Source=localhost\\SQLEXPRESS;Initial Catalog=app;User ID=u;Password=p',
    );

    expect(config).toMatchObject({
      server: 'localhost',
      database: 'app',
      options: { instanceName: 'SQLEXPRESS' },
    });
  });
});
