import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import {
  configWarnings,
  type LoadConfigOptions,
  loadConfig,
  provenanceOf,
  type QueueBoxConfig,
  redactConfig,
} from '@queuebox/config';
import { ConfigError, type ConfigIssue, errorFields } from '@queuebox/core';
import { checkServices } from '@queuebox/use-cases';
import { ADMIN_COMMANDS, createProgress, planAdminCommand, runAdminCommand } from './admin-cli.ts';
import { runDev } from './dev.ts';
import { openConfiguredStore } from './runtime.ts';

/** Where a command writes. */
export interface CommandIo {
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
  /** Environment for the configuration. Default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Default `process.cwd()`. */
  readonly cwd?: string;
  /** Whether stderr is a terminal (progress then updates one line in place). Default false. */
  readonly isTTY?: boolean;
}

/** Exit codes of the CLI (docs/design.md §7). */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/** The usage text of `queuebox`. */
export const USAGE = `Usage: queuebox <command> [--config <file>] [--json]

Commands:
  dev              run QueueBox locally (HTTP server, relay and outbox loops); what \`npm start\` runs
  migrate          apply pending migrations to the configured database, then exit
  config check     validate the configuration and print it with secrets redacted
  stats            rows per state, oldest due pending row, dead rows per topic / source
  outbox list      [--state pending|processing|sent|dead|failed] [--topic t] [--limit n] [--cursor id]
  outbox show <id>
  outbox requeue   <id…> | --topic t | --all   [--dry-run] [--batch-size n]   dead → pending, attempt 0
  outbox replay <id>                            a sent row again, as a new pending row
  outbox redact <id>                            erase a sent or dead row's payload, headers and last error
  inbox list       [--state pending|processing|processed|dead|failed] [--source s] [--limit n] [--cursor id]
  inbox show <id>
  inbox requeue    <id…> | --source s | --all  [--dry-run] [--batch-size n]
  inbox redact <id>                             the same for a processed or dead row, and its aggregate/correlation id
  purge            --state sent|processed|dead --older-than 7d|12h|1h (at least 1h) [--table outbox|inbox] [--batch-size n]
                   [--dry-run] (count per table, delete nothing) [--yes] (needed with --state dead)

Options:
  --config <file>  configuration file (default: $QUEUEBOX_CONFIG, else ./queuebox.yaml)
  --json           machine-readable output
  -h, --help       this text

Exit codes: 0 success, 1 failure, 2 bad usage.`;

/** Options that take a value, besides --config. */
const VALUE_OPTIONS = [
  'state',
  'topic',
  'source',
  'cursor',
  'limit',
  'batch-size',
  'older-than',
  'table',
] as const;

/** Options without a value, besides --json and --help. */
const FLAGS = ['dry-run', 'all', 'yes'] as const;

const valueOption = { type: 'string' } as const;
const flag = { type: 'boolean' } as const;

/** Every option of `queuebox`, for node:util's parseArgs. */
const OPTIONS = {
  config: valueOption,
  json: flag,
  help: { type: 'boolean', short: 'h' },
  ...(Object.fromEntries(VALUE_OPTIONS.map((name) => [name, valueOption])) as Record<
    (typeof VALUE_OPTIONS)[number],
    typeof valueOption
  >),
  ...(Object.fromEntries(FLAGS.map((name) => [name, flag])) as Record<(typeof FLAGS)[number], typeof flag>),
} satisfies ParseArgsOptionsConfig;

interface Parsed {
  readonly command: string[];
  readonly config?: string;
  readonly json: boolean;
  readonly help: boolean;
  /** Value options of the admin commands, by name without dashes. */
  readonly options: Record<string, string>;
  readonly flags: Set<string>;
}

/**
 * The command line as node:util's parseArgs tokenizes it (`--name value`, `--name=value`, `-h`, `--` ends the
 * options), checked here so each problem gets the CLI's own words: an unknown option, a value missing (or looking
 * like the next option), a value given twice, a value given to a flag.
 */
function parseCommandLine(argv: readonly string[]): Parsed | string {
  const { tokens } = parseArgs({
    args: [...argv],
    options: OPTIONS,
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  const command: string[] = [];
  let config: string | undefined;
  let json = false;
  let help = false;
  const options: Record<string, string> = {};
  const flags = new Set<string>();
  for (const token of tokens) {
    if (token.kind === 'positional') command.push(token.value);
    if (token.kind !== 'option') continue;
    const { name, rawName, value, inlineValue } = token;
    const known = Object.hasOwn(OPTIONS, name) ? OPTIONS[name as keyof typeof OPTIONS] : undefined;
    if (known === undefined) return `unknown option ${rawName}`;
    if (known.type === 'boolean') {
      if (inlineValue) return `${rawName} takes no value`;
      if (name === 'json') json = true;
      else if (name === 'help') help = true;
      else flags.add(name);
    } else if (name === 'config') {
      if (value === undefined || (!inlineValue && value.startsWith('-'))) return '--config needs a file name';
      config = value;
    } else {
      if (value === undefined || (!inlineValue && value.startsWith('--'))) return `--${name} needs a value`;
      if (options[name] !== undefined) return `--${name} may be given once`;
      options[name] = value;
    }
  }
  return { command, json, help, options, flags, ...(config === undefined ? {} : { config }) };
}

/**
 * What the runtime would refuse in a valid configuration, found without connecting to anything: the compilation of
 * sources, routes, destinations and transforms (`checkServices`, every problem at once), and a SQL Server
 * connection string, which the store reads as it opens (it connects only on first use). Each issue gets the
 * origin of its key.
 */
async function runtimeProblems(config: QueueBoxConfig, cwd: string | undefined): Promise<ConfigIssue[]> {
  const issues = [...(await checkServices(config))];
  if (config.database.provider === 'sqlserver') {
    try {
      const store = await openConfiguredStore(config.database, cwd);
      await store.close();
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      issues.push(...error.issues);
    }
  }
  const origins = provenanceOf(config)?.origins;
  return issues.map((issue) => {
    if (issue.origin !== undefined || origins === undefined) return issue;
    // The origin of the key, else of its nearest ancestor that has one (`routes[0].transform.jsonata` → `routes[0]`).
    let path = issue.path;
    for (;;) {
      const origin = origins.get(path);
      if (origin !== undefined) return { ...issue, origin };
      if (path === '') return issue;
      const parent = path.replace(/(^|\.)[^.[]*$|\[\d+\]$/, '');
      path = parent === path ? '' : parent;
    }
  });
}

function describeFailure(error: unknown): string {
  if (error instanceof ConfigError) return error.message;
  const { name, message } = errorFields(error);
  return `${name}: ${message}`;
}

/**
 * Runs one `queuebox` command and resolves with its exit code; `dev` resolves once the runtime is up and exits the
 * process itself at shutdown.
 */
export async function runCli(argv: readonly string[], io: CommandIo): Promise<number> {
  const parsed = parseCommandLine(argv);
  // A usage error: the message and the usage text on stderr, and with --json a JSON object on stdout as well, so a
  // script that reads stdout gets an answer for every exit code.
  const usageError = (message: string) => {
    if (typeof parsed === 'string' ? argv.includes('--json') : parsed.json) {
      io.out(`${JSON.stringify({ ok: false, error: 'usage', message })}\n`);
    }
    io.err(`${message}\n\n${USAGE}\n`);
    return EXIT.usage;
  };
  if (typeof parsed === 'string') return usageError(parsed);
  if (parsed.help) {
    io.out(`${USAGE}\n`);
    return EXIT.ok;
  }
  if (parsed.command.length === 0) {
    if (parsed.json) io.out(`${JSON.stringify({ ok: false, error: 'usage', message: 'no command' })}\n`);
    io.err(`${USAGE}\n`);
    return EXIT.usage;
  }
  const load: LoadConfigOptions = {
    ...(parsed.config === undefined ? {} : { file: parsed.config }),
    ...(io.env ? { env: io.env } : {}),
    ...(io.cwd ? { cwd: io.cwd } : {}),
  };
  const report = (failure: unknown, what: string) => {
    if (parsed.json) {
      const issues = failure instanceof ConfigError ? failure.issues : undefined;
      io.out(
        `${JSON.stringify({ ok: false, error: describeFailure(failure), ...(issues ? { issues } : {}) })}\n`,
      );
    } else io.err(`${what}: ${describeFailure(failure)}\n`);
    return EXIT.failure;
  };

  const [word] = parsed.command;
  if (word !== undefined && ADMIN_COMMANDS.has(word)) {
    const plan = planAdminCommand({ words: parsed.command, options: parsed.options, flags: parsed.flags });
    if (typeof plan === 'string') return usageError(plan);
    const what = `queuebox ${parsed.command.slice(0, 2).join(' ')}`;
    let config: Awaited<ReturnType<typeof loadConfig>>;
    try {
      config = await loadConfig(load);
    } catch (error) {
      return report(error, what);
    }
    try {
      const store = await openConfiguredStore(config.database, io.cwd);
      try {
        return await runAdminCommand(store, plan, {
          out: io.out,
          err: io.err,
          json: parsed.json,
          ...(io.isTTY === undefined ? {} : { isTTY: io.isTTY }),
        });
      } finally {
        await store.close();
      }
    } catch (error) {
      return report(error, what);
    }
  }
  const extra = [...Object.keys(parsed.options), ...parsed.flags];
  if (extra.length > 0) return usageError(`--${extra[0]} does not apply to "${parsed.command.join(' ')}"`);

  switch (parsed.command.join(' ')) {
    case 'dev': {
      const runtime = await runDev({ load, ...(io.cwd ? { cwd: io.cwd } : {}) });
      return runtime === undefined ? EXIT.failure : EXIT.ok;
    }
    case 'migrate': {
      let config: Awaited<ReturnType<typeof loadConfig>>;
      try {
        config = await loadConfig(load);
      } catch (error) {
        return report(error, 'queuebox migrate');
      }
      try {
        const store = await openConfiguredStore(config.database, io.cwd);
        try {
          const progress = createProgress({
            err: io.err,
            json: parsed.json,
            ...(io.isTTY === undefined ? {} : { isTTY: io.isTTY }),
          });
          const migrated = await store.migrate({
            onMigration: (m) =>
              progress.update(
                `${m.phase} migration ${m.index}/${m.total}: ${String(m.version).padStart(4, '0')}_${m.name}`,
              ),
          });
          progress.done();
          const applied = migrated.applied.map((m) => `${String(m.version).padStart(4, '0')}_${m.name}`);
          if (parsed.json) {
            io.out(
              `${JSON.stringify({ ok: true, provider: store.provider, schema: config.database.schema, applied, version: migrated.current })}\n`,
            );
          } else {
            io.out(
              `${applied.length === 0 ? 'Nothing to migrate' : `Applied ${applied.join(', ')}`}; schema ${config.database.schema} (${store.provider}) is at version ${migrated.current}.\n`,
            );
          }
        } finally {
          await store.close();
        }
        return EXIT.ok;
      } catch (error) {
        return report(error, 'queuebox migrate');
      }
    }
    case 'config check': {
      try {
        const config = await loadConfig(load);
        // Valid is not enough: what the runtime would refuse at start is refused here too, all of it at once.
        const problems = await runtimeProblems(config, io.cwd);
        if (problems.length > 0) throw new ConfigError(problems);
        const redacted = redactConfig(config);
        const warnings = configWarnings(config);
        io.out(
          `${JSON.stringify(parsed.json ? { ok: true, config: redacted, warnings } : redacted, null, 2)}\n`,
        );
        if (!parsed.json) {
          for (const w of warnings) io.err(`warning: ${w.path} ${w.message}\n`);
          io.err('The configuration is valid.\n');
        }
        return EXIT.ok;
      } catch (error) {
        return report(error, 'queuebox config check');
      }
    }
    default:
      return usageError(`unknown command "${parsed.command.join(' ')}"`);
  }
}
