/**
 * Bundles every Lambda function the way the deployment does and fails when a bundle that touches the database lacks
 * either store provider (docs/design.md §4, issue 6: the provider is chosen at run time through a dynamic import with a
 * literal specifier, so both must be inside every such bundle), or when something the bundles replace with a
 * module of ours (scripts/bundle/aliases.ts: `@azure/identity` and `iconv-lite` for tedious, `import` statements
 * of node:http) is back in a bundle (issue 7).
 *
 *   npx tsx scripts/check-bundles.ts                           exit 0 when every bundle holds both providers
 *   npx tsx scripts/check-bundles.ts --drop-provider sqlserver exit 1: shows the check catches a lost provider
 *   QUEUEBOX_DROP_PROVIDER=postgres npx tsx scripts/check-bundles.ts   the same, by environment variable
 *   npx tsx scripts/check-bundles.ts --no-plugins              exit 1: shows the check catches a lost replacement
 *   npx tsx scripts/check-bundles.ts --outdir .queuebox/bundles     also writes the bundles (to look at them)
 *
 * esbuild options as in a deployment (infra/functions-plan.ts FUNCTION_BUNDLE, which infra hands to SST): platform node,
 * format esm, target node24, minified with names kept, everything bundled (`packages: 'bundle'`) except `@aws-sdk/*`
 * (the Lambda runtime provides it) and the drivers' optional natives (`pg-native`, `cpu-features`), and the plugins
 * of FUNCTION_BUNDLE.plugins, the very module SST loads. `--drop-provider` rewrites
 * `import('@queuebox/store-<name>')` to an empty module through an esbuild plugin, as if the provider had left the
 * bundle; `--no-plugins` bundles without FUNCTION_BUNDLE.plugins.
 */
import { readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
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
    };
  });
}

interface CliArgs {
  dropProvider?: ProviderName;
  outdir?: string;
  plugins?: boolean;
}

function cliArgsOf(args: readonly string[]): CliArgs | string {
  let values: { 'drop-provider'?: string; outdir?: string; 'no-plugins'?: boolean };
  try {
    ({ values } = parseArgs({
      args: [...args],
      options: {
        'drop-provider': { type: 'string' },
        outdir: { type: 'string' },
        'no-plugins': { type: 'boolean' },
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
    console.log(`${report.entry.padEnd(32)} ${size}  ${verdict}${replacements}`);
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
  if (failed.length > 0 || unreplaced.length > 0) process.exit(1);
  console.log(
    `check-bundles: ${reports.length} function bundle(s) checked, every database bundle holds both providers and none holds what the plugins replace`,
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) await main();
