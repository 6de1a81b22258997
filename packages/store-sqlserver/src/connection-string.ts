import { ConfigError, type ConfigIssue } from '@queuebox/core';
import mssql from 'mssql';

/** Default port of SQL Server. */
export const DEFAULT_PORT = 1433;

/** Query parameters a `sqlserver://` URL may carry, by lower-case name. */
const URL_PARAMETERS = [
  'encrypt',
  'trustServerCertificate',
  'instanceName',
  'database',
  'applicationName',
  'connectTimeout',
  'requestTimeout',
] as const;

const ISSUE_PATH = 'database.url';

function fail(message: string): never {
  const issue: ConfigIssue = { path: ISSUE_PATH, message };
  throw new ConfigError([issue]);
}

function parseBoolean(name: string, value: string): boolean {
  const lower = value.toLowerCase();
  if (['true', '1', 'yes'].includes(lower)) return true;
  if (['false', '0', 'no'].includes(lower)) return false;
  return fail(`${name}=${value} is not a boolean (use true or false)`);
}

function parseMilliseconds(name: string, value: string): number {
  if (!/^\d+$/.test(value)) fail(`${name}=${value} is not a whole number of milliseconds`);
  return Number(value);
}

function decode(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return fail(`the ${what} of the URL is not valid percent-encoding`);
  }
}

/**
 * `sqlserver://user:password@host:port/database?encrypt=true&trustServerCertificate=false&…` (or `mssql://`) as
 * an mssql config. User and password are percent-decoded; the database may also be given as `?database=`; a
 * named instance as `?instanceName=`. Parameters (names without regard to case): `encrypt` (default true),
 * `trustServerCertificate` (default false), `instanceName`, `database`, `applicationName` (default `queuebox`),
 * `connectTimeout` and `requestTimeout` in milliseconds (mssql's defaults: 15000 each). Any other parameter is
 * refused, so a typo cannot silently drop a setting.
 */
export function parseSqlServerUrl(url: string): mssql.config {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return fail('not a valid URL (expected sqlserver://user:password@host:1433/database)');
  }
  if (parsed.protocol !== 'sqlserver:' && parsed.protocol !== 'mssql:') {
    fail(`unsupported scheme ${parsed.protocol}// (expected sqlserver:// or mssql://)`);
  }
  const server = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  if (!server) fail('the URL names no host');
  const port = parsed.port ? Number(parsed.port) : DEFAULT_PORT;
  const path = decode(parsed.pathname.replace(/^\//, ''), 'database');
  if (path.includes('/')) fail(`the path /${path} is not a database name`);

  const options: mssql.IOptions = { encrypt: true, trustServerCertificate: false, appName: 'queuebox' };
  const config: mssql.config = { server, port, options };
  if (parsed.username) config.user = decode(parsed.username, 'user');
  if (parsed.password) config.password = decode(parsed.password, 'password');
  if (path) config.database = path;

  for (const [rawName, value] of parsed.searchParams) {
    const name = URL_PARAMETERS.find((known) => known.toLowerCase() === rawName.toLowerCase());
    switch (name) {
      case 'encrypt':
        options.encrypt = parseBoolean(rawName, value);
        break;
      case 'trustServerCertificate':
        options.trustServerCertificate = parseBoolean(rawName, value);
        break;
      case 'instanceName':
        options.instanceName = value;
        break;
      case 'database':
        if (config.database && config.database !== value) {
          fail(`the database is named twice (/${config.database} and ?database=${value})`);
        }
        config.database = value;
        break;
      case 'applicationName':
        options.appName = value;
        break;
      case 'connectTimeout':
        config.connectionTimeout = parseMilliseconds(rawName, value);
        break;
      case 'requestTimeout':
        config.requestTimeout = parseMilliseconds(rawName, value);
        break;
      default:
        fail(`unknown URL parameter ${rawName} (known: ${URL_PARAMETERS.join(', ')})`);
    }
  }
  return config;
}

/**
 * A connection string as an mssql config: a `sqlserver://` / `mssql://` URL (see {@link parseSqlServerUrl}), or
 * an ADO.NET string (`Server=host,1433;Database=app;User Id=…;Password=…;Encrypt=true`) read by mssql's own
 * parser, except `UseUTC=false` and `Stream=true`, which are refused, and `Transaction Binding`, which is ignored
 * (mssql would read `Implicit Unbind`, .NET's default, as implicit transactions). JDBC strings are refused with a
 * hint. Errors are `ConfigError`s on `database.url` that never repeat the string, which may hold a password.
 */
export function parseConnectionString(connectionString: string): mssql.config {
  const text = connectionString.trim();
  if (/^(sqlserver|mssql):\/\//i.test(text)) return parseSqlServerUrl(text);
  if (/^jdbc:/i.test(text)) {
    fail('JDBC connection strings are not supported: write sqlserver://user:password@host:1433/database');
  }
  if (!text.includes('=')) {
    fail('expected a sqlserver:// URL or an ADO.NET connection string (Server=…;Database=…)');
  }
  let config: mssql.config;
  try {
    config = mssql.ConnectionPool.parseConnectionString(text);
  } catch (error) {
    return fail(`the ADO.NET connection string could not be read: ${(error as Error).message}`);
  }
  if (!config.server) fail('the connection string names no server (Server=host,port)');
  // mssql reads three settings from an ADO.NET string that the store cannot run under.
  if (config.options?.useUTC === false) {
    fail(
      'UseUTC=false is not supported: the DATETIME2 columns hold UTC, and tedious would read them as local time',
    );
  }
  if (config.stream === true) {
    fail('Stream=true is not supported: the store reads the rows of each statement as one result');
  }
  // .NET's `Transaction Binding` (whose default is Implicit Unbind) concerns System.Transactions; mssql turns
  // `Implicit Unbind` into tedious's enableImplicitTransactions (SET IMPLICIT_TRANSACTIONS ON at login), under which
  // no statement the store runs outside a transaction of its own would ever commit. It is ignored.
  config.options = { appName: 'queuebox', ...config.options, enableImplicitTransactions: false };
  return config;
}
