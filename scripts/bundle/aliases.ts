/**
 * What the Lambda bundles replace with smaller or cheaper modules of ours, and the esbuild plugin that does it:
 * `@azure/identity` and `iconv-lite` as tedious imports them (≈ 0.95 MB of every bundle, see the two modules), and
 * `import … from 'node:http'` (≈ 30 ms of every cold start on Node 24, see node-http.ts). SST gets the plugin
 * through `nodejs.plugins` (scripts/bundle/sst-plugins.ts, named by infra/functions-plan.ts FUNCTION_BUNDLE);
 * scripts/check-bundles.ts and bench/lambda.ts load that same file, and check-bundles fails when a replaced
 * package's code, or an `import` of node:http, is back in a bundle.
 *
 * Why a plugin and not esbuild's `alias` option: SST hands esbuild only some of `nodejs.esbuild` (external,
 * keepNames, sourcemap, target, define, mainFields, conditions, nodePaths), not `alias`, and its types refuse it;
 * an alias could not tell tedious's imports or `import` statements from the rest either. This file imports nothing
 * but Node built-ins (types aside), because SST loads it with plain `node`, outside any bundler.
 */
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Plugin } from 'esbuild';

/** One replaced package or built-in module. */
export interface BundleAlias {
  /** The import specifiers answered with {@link replacement}; the first names the alias in reports. */
  readonly specifiers: readonly string[];
  /** Our module, relative to the repository root. */
  readonly replacement: string;
  /** Only imports made from inside these packages are redirected; absent: imports from anywhere. */
  readonly importers?: readonly string[];
  /** Only `import` statements are redirected, `require()` calls keep the real module. Default false. */
  readonly importStatementsOnly?: boolean;
  /** Packages whose code must not be in a bundle once the replacement is in (the package and what it drags in). */
  readonly leftOut: readonly string[];
}

/** What the bundles replace. */
export const BUNDLE_ALIASES: readonly BundleAlias[] = [
  {
    specifiers: ['@azure/identity'],
    replacement: 'scripts/bundle/azure-identity.ts',
    importers: ['tedious'],
    leftOut: ['@azure/identity', '@azure/msal-node', '@azure/msal-common'],
  },
  {
    specifiers: ['iconv-lite'],
    replacement: 'scripts/bundle/iconv-lite.ts',
    importers: ['tedious'],
    leftOut: ['iconv-lite'],
  },
  {
    specifiers: ['node:http', 'http'],
    replacement: 'scripts/bundle/node-http.ts',
    importStatementsOnly: true,
    leftOut: [],
  },
];

/** The repository root, seen from this file. */
export const BUNDLE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Whether `path` lies inside one of `packages` under a `node_modules` folder. */
function insidePackage(path: string, packages: readonly string[]): boolean {
  const normal = path.split(sep).join('/');
  return packages.some((name) => normal.includes(`/node_modules/${name}/`));
}

/** The alias answering an import of `path` of esbuild kind `kind` made from `importer`, if any. */
export function aliasFor(path: string, importer: string, kind: string): BundleAlias | undefined {
  return BUNDLE_ALIASES.find(
    (alias) =>
      alias.specifiers.includes(path) &&
      (alias.importers === undefined || insidePackage(importer, alias.importers)) &&
      (!alias.importStatementsOnly || kind === 'import-statement'),
  );
}

/**
 * The esbuild plugin that answers each import {@link aliasFor} finds with our module (an absolute path under
 * `root`, default the repository root) and leaves every other import to esbuild.
 */
export function aliasPlugin(root: string = BUNDLE_ROOT): Plugin {
  return {
    name: 'queuebox-bundle-aliases',
    setup(build) {
      // Filter `.*`, checked inside: SST's bridge (.sst/platform/functions/nodejs-runtime/plugin.mjs) tests the
      // filter against its message rather than the import path, so only a filter matching anything is ever called.
      build.onResolve({ filter: /.*/ }, (args) => {
        const alias = aliasFor(args.path, args.importer, args.kind);
        return alias ? { path: join(root, alias.replacement) } : undefined;
      });
    },
  };
}
