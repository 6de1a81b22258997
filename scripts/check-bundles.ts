/**
 * Bundles every Lambda function the way the deployment does and fails when a bundle that touches the database lacks
 * either store provider (DESIGN.md §4, issue 6: the provider is chosen at run time through a dynamic import with a
 * literal specifier, so both must be inside every such bundle).
 *
 *   npx tsx scripts/check-bundles.ts                           exit 0 when every bundle holds both providers
 *   npx tsx scripts/check-bundles.ts --drop-provider sqlserver exit 1: shows the check catches a lost provider
 *   QUEUEBOX_DROP_PROVIDER=postgres npx tsx scripts/check-bundles.ts   the same, by environment variable
 *   npx tsx scripts/check-bundles.ts --outdir .queuebox/bundles     also writes the bundles (to look at them)
 *
 * esbuild options as in a deployment (infra/plan.ts FUNCTION_BUNDLE, which infra hands to SST): platform node,
 * format esm, target node24, minified, everything bundled (`packages: 'bundle'`) except `@aws-sdk/*` (the Lambda
 * runtime provides it) and the drivers' optional natives (`pg-native`, `cpu-features`). `--drop-provider` rewrites
 * `import('@queuebox/store-<name>')` to an empty module through an esbuild plugin, as if the provider had left the
 * bundle.
 */
import { readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Format, type Metafile, type Plugin } from 'esbuild';
import { FUNCTION_BUNDLE } from '../infra/plan.ts';

/** The store providers every bundle that touches the database must contain, by the package folder they live in. */
export const PROVIDERS = {
  postgres: 'packages/store-postgres/',
  sqlserver: 'packages/store-sqlserver/',
} as const;

/** A provider name: `postgres` or `sqlserver`. */
export type ProviderName = keyof typeof PROVIDERS;

/** The module whose presence means "this bundle touches the database". */
export const STORE_LOADER = 'packages/store/src/index.ts';

/** Left out of every bundle, as in the deployment: `@aws-sdk/*`, `pg-native`, `cpu-features`. */
export const EXTERNAL: readonly string[] = FUNCTION_BUNDLE.external;

/** esbuild's target for the deployment's Lambda runtime (`nodejs24.x` → `node24`). */
export const TARGET = FUNCTION_BUNDLE.runtime.replace(/^nodejs(\d+)\.x$/, 'node$1');

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

/**
 * Bundles the functions as the deployment does (one esbuild run, one output per function, no code splitting, so
 * each output is exactly one function's bundle) and reports the providers each bundle holds.
 */
export async function checkBundles(options: CheckBundlesOptions = {}): Promise<BundleReport[]> {
  const root = options.root ?? resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const entries = options.functions ?? functionEntries(root);
  const result = await build({
    absWorkingDir: root,
    entryPoints: [...entries],
    bundle: true,
    packages: 'bundle',
    platform: 'node',
    format: FUNCTION_BUNDLE.format satisfies Format,
    target: TARGET,
    minify: FUNCTION_BUNDLE.minify,
    external: [...EXTERNAL],
    // CommonJS dependencies call require(); an ESM bundle needs one (SST adds the same banner).
    banner: {
      js: "import { createRequire as __queueboxRequire } from 'node:module'; const require = __queueboxRequire(import.meta.url);",
    },
    metafile: true,
    logLevel: 'silent',
    write: options.outdir !== undefined,
    outdir: join(root, options.outdir ?? '.queuebox/bundles'),
    outbase: join(root, 'functions'),
    outExtension: { '.js': '.mjs' },
    ...(options.tsconfig ? { tsconfig: options.tsconfig } : {}),
    plugins: options.dropProvider ? [dropProviderPlugin(options.dropProvider)] : [],
  });
  const outputs: Metafile['outputs'][string][] = Object.values(result.metafile.outputs);
  return entries.map((entry) => {
    const output = outputs.find((o) => o.entryPoint?.replace(/\\/g, '/') === entry);
    if (!output) throw new Error(`check-bundles: esbuild wrote no bundle for ${entry}`);
    const { touchesDatabase, providers } = providersIn(Object.keys(output.inputs));
    const missing = touchesDatabase
      ? (Object.keys(PROVIDERS) as ProviderName[]).filter((name) => !providers[name])
      : [];
    return { entry, bytes: output.bytes, touchesDatabase, providers, missing };
  });
}

function parseArgs(args: readonly string[]): { dropProvider?: ProviderName; outdir?: string } | string {
  const parsed: { dropProvider?: ProviderName; outdir?: string } = {};
  const fromEnv = process.env.QUEUEBOX_DROP_PROVIDER;
  let drop: string | undefined = fromEnv === '' ? undefined : fromEnv;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--drop-provider') drop = args[++i];
    else if (arg?.startsWith('--drop-provider=')) drop = arg.slice('--drop-provider='.length);
    else if (arg === '--outdir') parsed.outdir = args[++i];
    else return `unknown argument ${arg}`;
  }
  if (drop !== undefined) {
    if (!Object.hasOwn(PROVIDERS, drop))
      return `--drop-provider takes ${Object.keys(PROVIDERS).join(' or ')}, not ${drop}`;
    parsed.dropProvider = drop as ProviderName;
  }
  return parsed;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (typeof args === 'string') {
    console.error(`check-bundles: ${args}`);
    process.exit(2);
  }
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  if (args.dropProvider)
    console.log(`check-bundles: dropping @queuebox/store-${args.dropProvider} from every bundle`);
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
    console.log(`${report.entry.padEnd(32)} ${size}  ${verdict}`);
  }
  const failed = reports.filter((r) => r.missing.length > 0);
  if (failed.length > 0) {
    console.error(
      `check-bundles: ${failed.length} bundle(s) lack a store provider; database.provider would fail at run time: ${failed
        .map((r) => `${relative(root, join(root, r.entry))} (${r.missing.join(', ')})`)
        .join('; ')}`,
    );
    process.exit(1);
  }
  console.log(
    `check-bundles: ${reports.length} function bundle(s) checked, every database bundle holds both providers`,
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) await main();
