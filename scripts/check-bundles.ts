/**
 * Bundles every Lambda function the way the deployment does and fails when a bundle that touches the database lacks
 * either store provider (docs/design.md §4, issue 6: the provider is chosen at run time through a dynamic import with a
 * literal specifier, so both must be inside every such bundle), or when something the bundles replace with a
 * module of ours (scripts/bundle/aliases.ts: `@azure/identity` and `iconv-lite` for tedious, `import` statements
 * of node:http) is back in a bundle (issue 7), or when a bundle does at import what it should do on demand (an
 * outside audit of the cold starts): a top-level `import` of an `@aws-sdk/*` client (external, the runtime's: esbuild
 * hoists a static import of an external to the top of the bundle, so every cold start loaded it; each client is
 * imported on first use), or evaluating, when the bundle is imported, a package that only some configurations need
 * (`LAZY_PACKAGES`: JSONata, and the broker drivers outside the function that consumes that broker).
 *
 *   npx tsx scripts/check-bundles.ts                           exit 0 when every bundle holds both providers
 *   npx tsx scripts/check-bundles.ts --drop-provider sqlserver exit 1: shows the check catches a lost provider
 *   QUEUEBOX_DROP_PROVIDER=postgres npx tsx scripts/check-bundles.ts   the same, by environment variable
 *   npx tsx scripts/check-bundles.ts --no-plugins              exit 1: shows the check catches a lost replacement
 *   npx tsx scripts/check-bundles.ts --outdir .queuebox/bundles     also writes the bundles (to look at them)
 *   npx tsx scripts/check-bundles.ts --skip-init               without the import check (no bundle is run)
 *
 * esbuild options as in a deployment (infra/functions-plan.ts FUNCTION_BUNDLE, which infra hands to SST): platform node,
 * format esm, target node24, minified with names kept, everything bundled (`packages: 'bundle'`) except `@aws-sdk/*`
 * (the Lambda runtime provides it) and the drivers' optional natives (`pg-native`, `cpu-features`), and the plugins
 * of FUNCTION_BUNDLE.plugins, the very module SST loads. `--drop-provider` rewrites
 * `import('@queuebox/store-<name>')` to an empty module through an esbuild plugin, as if the provider had left the
 * bundle; `--no-plugins` bundles without FUNCTION_BUNDLE.plugins.
 */
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { type BuildOptions, build, type Format, type Metafile, type Plugin } from 'esbuild';
import { FUNCTION_BUNDLE } from '../infra/functions-plan.ts';
import { BUNDLE_ALIASES } from './bundle/aliases.ts';

/** The store providers every bundle that touches the database must contain, by the package folder they live in. */
export const PROVIDERS = {
  postgres: 'packages/store-postgres/',
  sqlserver: 'packages/store-sqlserver/',
} as const;

/** A provider name: `postgres` or `sqlserver`. */
export type ProviderName = keyof typeof PROVIDERS;

/** The module whose presence means "this bundle touches the database". */
export const STORE_LOADER = 'packages/store/src/index.ts';

/** Left out of every bundle, as in the deployment: `@aws-sdk/*`, `pg-native`, `cpu-features`, PGlite. */
export const EXTERNAL: readonly string[] = FUNCTION_BUNDLE.external;

/** esbuild's target for the deployment's Lambda runtime (`nodejs24.x` → `node24`). */
export const TARGET = FUNCTION_BUNDLE.runtime.replace(/^nodejs(\d+)\.x$/, 'node$1');

/** The banner SST puts on an ESM bundle, as far as it matters here: CommonJS dependencies call require(). */
export const ESM_BANNER =
  "import { createRequire as __queueboxRequire } from 'node:module'; const require = __queueboxRequire(import.meta.url);";

/**
 * Packages no bundle may evaluate when it is imported (a cold start's init), by the first specifier of the package
 * (`@nats-io/` covers every package of that scope), with the functions that may, as they need it whatever the
 * configuration. They load on demand: JSONata on the first JSONata transform (the inbox's `loadJsonata`, the
 * outbox's transform compiler); the broker drivers in outbox-tick when a destination of their type is configured
 * (functions/lambda-shell/lazy-publishers.ts).
 */
export const LAZY_PACKAGES: readonly { readonly name: string; readonly except: readonly string[] }[] = [
  { name: 'jsonata', except: [] },
  { name: 'kafkajs', except: ['functions/kafka-source.ts'] },
  { name: 'amqplib', except: ['functions/amqp-source.ts'] },
  { name: '@nats-io/', except: ['functions/nats-source-tick.ts'] },
];

/** The external modules a bundle may not import at its top: every AWS SDK client is imported on first use. */
export const NO_TOP_LEVEL_IMPORT = /^@aws-sdk\//;

/** The esbuild plugins of FUNCTION_BUNDLE.plugins (the default export SST loads), under `root`. */
export async function deploymentPlugins(root: string): Promise<Plugin[]> {
  const module = (await import(pathToFileURL(join(root, FUNCTION_BUNDLE.plugins)).href)) as {
    default: Plugin[];
  };
  return module.default;
}

/** Options of {@link checkBundles}. */
export interface CheckBundlesOptions {
  /** The repository root. Default: the parent of this script's folder. */
  readonly root?: string;
  /** Entry points relative to the root. Default: every `functions/*.ts`. */
  readonly functions?: readonly string[];
  /** Rewrite this provider's import to an empty module (to show the check fails). Default none. */
  readonly dropProvider?: ProviderName;
  /** Write the bundles here (relative to the root), one `<function>.mjs` each. Default: kept in memory. */
  readonly outdir?: string;
  /** tsconfig esbuild reads. Default esbuild's own lookup (the root `tsconfig.json`). */
  readonly tsconfig?: string;
  /** Bundle with FUNCTION_BUNDLE.plugins (to show the check fails without them, pass false). Default true. */
  readonly plugins?: boolean;
  /**
   * Also import each bundle (built again unminified, its module wrappers instrumented) in a fresh Node process and
   * report the packages it evaluates (`evaluatedAtImport`, `lazyEvaluated`). Default false.
   */
  readonly init?: boolean;
}

/** What one function's bundle holds. */
export interface BundleReport {
  readonly entry: string;
  /** Output size in bytes. */
  readonly bytes: number;
  /** Whether `@queuebox/store` is in the bundle. */
  readonly touchesDatabase: boolean;
  readonly providers: Readonly<Record<ProviderName, boolean>>;
  /** Providers missing from a bundle that touches the database. */
  readonly missing: readonly ProviderName[];
  /** Replacements of scripts/bundle/aliases.ts in the bundle, by first specifier (`iconv-lite`, `node:http`…). */
  readonly replaced: readonly string[];
  /** What a replacement leaves out but the bundle holds anyway (`iconv-lite`, `import of node:http`…). */
  readonly unreplaced: readonly string[];
  /** External modules the bundle imports at its top (`import … from`) that {@link NO_TOP_LEVEL_IMPORT} forbids. */
  readonly topLevelImports: readonly string[];
  /** With `init`: the packages (name → modules) evaluated when the bundle is imported. */
  readonly evaluatedAtImport?: Readonly<Record<string, number>>;
  /** With `init`: the {@link LAZY_PACKAGES} the bundle evaluated at import although it should not. */
  readonly lazyEvaluated: readonly string[];
}

/** The functions in `functions/` (one `.ts` file per Lambda entry point), relative to `root`, sorted. */
export function functionEntries(root: string): string[] {
  return readdirSync(join(root, 'functions'), { withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts'))
    .map((entry) => `functions/${entry.name}`)
    .sort();
}

/** An esbuild plugin that answers `import('@queuebox/store-<provider>')` with an empty module. */
export function dropProviderPlugin(provider: ProviderName): Plugin {
  const specifier = `@queuebox/store-${provider}`;
  return {
    name: 'queuebox-drop-provider',
    setup(build) {
      build.onResolve({ filter: new RegExp(`^${specifier.replace(/[/.]/g, '\\$&')}$`) }, () => ({
        path: specifier,
        namespace: 'queuebox-dropped-provider',
      }));
      build.onLoad({ filter: /.*/, namespace: 'queuebox-dropped-provider' }, () => ({
        contents: 'export {};',
        loader: 'js',
      }));
    },
  };
}

/** Which providers a bundle's inputs hold (paths relative to the root, symlinks resolved). */
export function providersIn(inputs: readonly string[]): {
  touchesDatabase: boolean;
  providers: Record<ProviderName, boolean>;
} {
  const paths = inputs.map((path) => path.replace(/\\/g, '/'));
  const has = (folder: string) =>
    paths.some((path) => path.startsWith(folder) || path.includes(`/${folder}`));
  return {
    touchesDatabase: paths.some((path) => path === STORE_LOADER || path.endsWith(`/${STORE_LOADER}`)),
    providers: { postgres: has(PROVIDERS.postgres), sqlserver: has(PROVIDERS.sqlserver) },
  };
}

/** One import esbuild left in a bundle (metafile `outputs[…].imports`), e.g. a built-in module. */
export interface BundleImport {
  readonly path: string;
  readonly kind: string;
  readonly external?: boolean;
}

/**
 * Which replacements of scripts/bundle/aliases.ts a bundle holds (by each alias's first specifier), and which
 * left-out packages (in its inputs) or replaced `import` statements of built-ins (in its imports) it holds anyway.
 */
export function replacementsIn(
  inputs: readonly string[],
  imports: readonly BundleImport[] = [],
): { replaced: string[]; unreplaced: string[] } {
  const paths = inputs.map((path) => path.replace(/\\/g, '/'));
  const replaced: string[] = [];
  const unreplaced = new Set<string>();
  for (const alias of BUNDLE_ALIASES) {
    if (paths.some((path) => path === alias.replacement || path.endsWith(`/${alias.replacement}`)))
      replaced.push(alias.specifiers[0] ?? alias.replacement);
    for (const name of alias.leftOut) {
      if (
        paths.some(
          (path) => path.startsWith(`node_modules/${name}/`) || path.includes(`/node_modules/${name}/`),
        )
      )
        unreplaced.add(name);
    }
    if (alias.importStatementsOnly) {
      for (const imported of imports) {
        if (imported.kind === 'import-statement' && alias.specifiers.includes(imported.path))
          unreplaced.add(`import of ${imported.path}`);
      }
    }
  }
  return { replaced, unreplaced: [...unreplaced] };
}

/**
 * esbuild options of the deployment for `entries` (paths relative to `root`), one `<function>.mjs` per entry and
 * no code splitting, so each output is exactly one function's bundle; with a metafile, nothing written.
 */
export function deploymentBuildOptions(
  root: string,
  entries: readonly string[],
  plugins: readonly Plugin[],
): BuildOptions & { metafile: true } {
  return {
    absWorkingDir: root,
    entryPoints: [...entries],
    bundle: true,
    packages: 'bundle',
    platform: 'node',
    format: FUNCTION_BUNDLE.format satisfies Format,
    target: TARGET,
    minify: FUNCTION_BUNDLE.minify,
    keepNames: FUNCTION_BUNDLE.keepNames,
    external: [...EXTERNAL],
    banner: { js: ESM_BANNER },
    metafile: true,
    logLevel: 'silent',
    write: false,
    outbase: join(root, 'functions'),
    outExtension: { '.js': '.mjs' },
    plugins: [...plugins],
  };
}

/** The forbidden externals ({@link NO_TOP_LEVEL_IMPORT}) among a bundle's imports (metafile `outputs[…].imports`). */
export function topLevelImportsIn(imports: readonly BundleImport[]): string[] {
  return [
    ...new Set(
      imports
        .filter((imported) => imported.kind === 'import-statement' && NO_TOP_LEVEL_IMPORT.test(imported.path))
        .map((imported) => imported.path),
    ),
  ];
}

/** The package of a bundled module's path (`node_modules/@nats-io/nats-core/lib/x.js` → `@nats-io/nats-core`). */
export function packageOf(path: string): string {
  const normalized = path.replace(/\\/g, '/');
  const at = normalized.lastIndexOf('node_modules/');
  if (at < 0) return normalized.split('/').slice(0, 2).join('/');
  const parts = normalized.slice(at + 'node_modules/'.length).split('/');
  return (parts[0] ?? '').startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] ?? '');
}

/** The {@link LAZY_PACKAGES} among `evaluated` (package → modules) that `entry` may not evaluate at import. */
export function lazyEvaluatedIn(entry: string, evaluated: Readonly<Record<string, number>>): string[] {
  const normalized = entry.replace(/\\/g, '/');
  return Object.keys(evaluated)
    .filter((name) =>
      LAZY_PACKAGES.some(
        (lazy) =>
          (lazy.name.endsWith('/') ? name.startsWith(lazy.name) : name === lazy.name) &&
          !lazy.except.includes(normalized),
      ),
    )
    .sort();
}

/**
 * Marks esbuild's module wrappers (`__commonJS` for CommonJS, `__esm` for lazily initialised ES modules) of an
 * unminified bundle so that each records its module's path in `globalThis.__queueboxEvaluated` when it runs. Throws
 * when the helpers are not found (a new esbuild writes them otherwise: the check would see nothing).
 */
export function instrumentBundle(js: string): string {
  let found = 0;
  const marked = js
    .replace(/var __commonJS = \(cb, mod\) => function (__require\d*)\(\) \{\n/, (head) => {
      found++;
      return `${head}  if (!mod) globalThis.__queueboxEvaluated.add(Object.keys(cb)[0]);\n`;
    })
    .replace(/var __esm = \(fn, res(, err)?\) => function __init\(\) \{\n/, (head) => {
      found++;
      return `${head}  if (fn) globalThis.__queueboxEvaluated.add(Object.keys(fn)[0]);\n`;
    });
  // A bundle without any CommonJS or lazy ES module has neither helper; one found is enough to show the shape.
  if (found === 0 && /var __(commonJS|esm) = /.test(js))
    throw new Error(
      'check-bundles: esbuild module wrappers not recognised; cannot see what a bundle evaluates',
    );
  return `globalThis.__queueboxEvaluated = new Set();\n${marked}`;
}

const run = promisify(execFile);

/** The import of one instrumented bundle in a fresh Node process: prints the paths its wrappers recorded. */
const IMPORT_AND_REPORT = `await import(process.argv[1]); process.stdout.write(JSON.stringify([...globalThis.__queueboxEvaluated]));`;

/**
 * The packages each function's bundle evaluates when imported (what a cold start's init runs; the configuration is
 * loaded on the first invocation, after), as package → modules evaluated. The bundles are built again unminified,
 * with the deployment's options and plugins, instrumented ({@link instrumentBundle}), written under
 * `<root>/.queuebox/bundle-init-*` (removed after; so the runtime's externals, `@aws-sdk/*`, resolve from the repository's
 * node_modules, as from the runtime's) and imported, each in its own Node process with only PATH and AWS_REGION set.
 */
export async function evaluatedAtImport(
  root: string,
  entries: readonly string[],
  plugins: readonly Plugin[],
): Promise<Map<string, Record<string, number>>> {
  await mkdir(join(root, '.queuebox'), { recursive: true });
  const outdir = await mkdtemp(join(root, '.queuebox', 'bundle-init-'));
  try {
    // Laid out by their paths from the root (an entry outside functions/, a test's, lands inside outdir too).
    const result = await build({
      ...deploymentBuildOptions(root, entries, plugins),
      minify: false,
      outbase: root,
      outdir,
    });
    const evaluated = new Map<string, Record<string, number>>();
    await Promise.all(
      entries.map(async (entry) => {
        const expected = entry.replace(/\\/g, '/').replace(/\.[cm]?[jt]s$/, '.mjs');
        const output = result.outputFiles?.find(
          (file) => relative(outdir, file.path).replace(/\\/g, '/') === expected,
        );
        if (!output) throw new Error(`check-bundles: esbuild wrote no bundle for ${entry}`);
        await mkdir(dirname(output.path), { recursive: true });
        await writeFile(output.path, instrumentBundle(output.text));
        const { stdout } = await run(
          process.execPath,
          ['--input-type=module', '-e', IMPORT_AND_REPORT, pathToFileURL(output.path).href],
          {
            cwd: root,
            env: { PATH: process.env.PATH ?? '', AWS_REGION: 'us-east-1' },
            maxBuffer: 16 * 1024 * 1024,
          },
        );
        const byPackage: Record<string, number> = {};
        for (const path of JSON.parse(stdout) as string[]) {
          const name = packageOf(path);
          byPackage[name] = (byPackage[name] ?? 0) + 1;
        }
        evaluated.set(entry, byPackage);
      }),
    );
    return evaluated;
  } finally {
    await rm(outdir, { recursive: true, force: true });
  }
}

/**
 * Bundles the functions as the deployment does (one esbuild run, one output per function, no code splitting, so
 * each output is exactly one function's bundle) and reports the providers and replacements each bundle holds.
 */
export async function checkBundles(options: CheckBundlesOptions = {}): Promise<BundleReport[]> {
  const root = options.root ?? resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const entries = options.functions ?? functionEntries(root);
  const plugins = [
    ...(options.dropProvider ? [dropProviderPlugin(options.dropProvider)] : []),
    ...(options.plugins === false ? [] : await deploymentPlugins(root)),
  ];
  const result = await build({
    ...deploymentBuildOptions(root, entries, plugins),
    write: options.outdir !== undefined,
    outdir: join(root, options.outdir ?? '.queuebox/bundles'),
    ...(options.tsconfig ? { tsconfig: options.tsconfig } : {}),
  });
  const outputs: Metafile['outputs'][string][] = Object.values(result.metafile.outputs);
  const evaluated = options.init ? await evaluatedAtImport(root, entries, plugins) : undefined;
  return entries.map((entry) => {
    const output = outputs.find((o) => o.entryPoint?.replace(/\\/g, '/') === entry);
    if (!output) throw new Error(`check-bundles: esbuild wrote no bundle for ${entry}`);
    const inputs = Object.keys(output.inputs);
    const { touchesDatabase, providers } = providersIn(inputs);
    const missing = touchesDatabase
      ? (Object.keys(PROVIDERS) as ProviderName[]).filter((name) => !providers[name])
      : [];
    return {
      entry,
      bytes: output.bytes,
      touchesDatabase,
      providers,
      missing,
      ...replacementsIn(inputs, output.imports),
      topLevelImports: topLevelImportsIn(output.imports),
      ...(evaluated ? { evaluatedAtImport: evaluated.get(entry) ?? {} } : {}),
      lazyEvaluated: lazyEvaluatedIn(entry, evaluated?.get(entry) ?? {}),
    };
  });
}

interface CliArgs {
  dropProvider?: ProviderName;
  outdir?: string;
  plugins?: boolean;
  init?: boolean;
}

function cliArgsOf(args: readonly string[]): CliArgs | string {
  let values: { 'drop-provider'?: string; outdir?: string; 'no-plugins'?: boolean; 'skip-init'?: boolean };
  try {
    ({ values } = parseArgs({
      args: [...args],
      options: {
        'drop-provider': { type: 'string' },
        outdir: { type: 'string' },
        'no-plugins': { type: 'boolean' },
        'skip-init': { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  const parsed: CliArgs = {};
  if (values.outdir !== undefined) parsed.outdir = values.outdir;
  if (values['no-plugins']) parsed.plugins = false;
  parsed.init = values['skip-init'] !== true;
  const fromEnv = process.env.QUEUEBOX_DROP_PROVIDER;
  const drop = values['drop-provider'] ?? (fromEnv === '' ? undefined : fromEnv);
  if (drop !== undefined) {
    if (!Object.hasOwn(PROVIDERS, drop))
      return `--drop-provider takes ${Object.keys(PROVIDERS).join(' or ')}, not ${drop}`;
    parsed.dropProvider = drop as ProviderName;
  }
  return parsed;
}

async function main(): Promise<void> {
  const args = cliArgsOf(process.argv.slice(2));
  if (typeof args === 'string') {
    console.error(`check-bundles: ${args}`);
    process.exit(2);
  }
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  if (args.dropProvider)
    console.log(`check-bundles: dropping @queuebox/store-${args.dropProvider} from every bundle`);
  if (args.plugins === false) console.log(`check-bundles: bundling without ${FUNCTION_BUNDLE.plugins}`);
  let reports: BundleReport[];
  try {
    reports = await checkBundles({ root, ...args });
  } catch (error) {
    // esbuild's message lists the first errors with file:line; the stack adds nothing.
    console.error(
      `check-bundles: bundling failed: ${error instanceof Error ? error.message : String(error)}`,
    );
    process.exit(1);
  }
  for (const report of reports) {
    const size = `${(report.bytes / 1024).toFixed(0)} KiB`.padStart(9);
    const verdict = !report.touchesDatabase
      ? 'no database'
      : report.missing.length === 0
        ? 'postgres + sqlserver'
        : `MISSING ${report.missing.join(', ')}`;
    const replacements =
      report.unreplaced.length > 0
        ? `  UNREPLACED ${report.unreplaced.join(', ')}`
        : report.replaced.length > 0
          ? `  ours: ${report.replaced.join(', ')}`
          : '';
    const onDemand = [
      ...report.topLevelImports.map((name) => `TOP-LEVEL IMPORT ${name}`),
      ...report.lazyEvaluated.map((name) => `EVALUATED AT IMPORT ${name}`),
    ];
    console.log(
      `${report.entry.padEnd(32)} ${size}  ${verdict}${replacements}${onDemand.length > 0 ? `  ${onDemand.join(', ')}` : ''}`,
    );
  }
  const failed = reports.filter((r) => r.missing.length > 0);
  if (failed.length > 0) {
    console.error(
      `check-bundles: ${failed.length} bundle(s) lack a store provider; database.provider would fail at run time: ${failed
        .map((r) => `${relative(root, join(root, r.entry))} (${r.missing.join(', ')})`)
        .join('; ')}`,
    );
  }
  const unreplaced = reports.filter((r) => r.unreplaced.length > 0);
  if (unreplaced.length > 0) {
    console.error(
      `check-bundles: ${unreplaced.length} bundle(s) hold what scripts/bundle/aliases.ts replaces (is ${FUNCTION_BUNDLE.plugins} applied, or does a new importer need them?): ${unreplaced
        .map((r) => `${relative(root, join(root, r.entry))} (${r.unreplaced.join(', ')})`)
        .join('; ')}`,
    );
  }
  const eager = reports.filter((r) => r.topLevelImports.length > 0 || r.lazyEvaluated.length > 0);
  if (eager.length > 0) {
    console.error(
      `check-bundles: ${eager.length} bundle(s) load at import what they should load on demand (a static import of an AWS SDK client, or of a package only some configurations need): ${eager
        .map(
          (r) =>
            `${relative(root, join(root, r.entry))} (${[...r.topLevelImports.map((name) => `import of ${name}`), ...r.lazyEvaluated].join(', ')})`,
        )
        .join('; ')}`,
    );
  }
  if (failed.length > 0 || unreplaced.length > 0 || eager.length > 0) process.exit(1);
  console.log(
    `check-bundles: ${reports.length} function bundle(s) checked: every database bundle holds both providers; none holds what the plugins replace or imports an AWS SDK client at its top${args.init === false ? '' : '; none evaluates at import what loads on demand'}`,
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) await main();
