/**
 * Packs a workspace package into a tarball an application installs with `npm install <tarball>`: compiled
 * JavaScript and type declarations (tsc), its README, and the QueueBox packages it needs inside it as bundled
 * dependencies, so nothing of QueueBox has to come from a registry.
 *
 *   npx tsx scripts/pack.ts packages/client          → packages/client/dist/queuebox-client-0.1.0.tgz
 *   npm run pack:client                              the same
 *
 * In the workspace every package exports its TypeScript sources (`./src/*.ts`), which tsx, Vitest and esbuild
 * run as they are; an installed package must export JavaScript. So the tarball is packed from a staged copy,
 * `<package>/dist/package/`, never from the package folder itself:
 *
 * - `dist/build/<name>/` — tsc output (`.js` + `.d.ts`) of the package and of every `@queuebox/*` package it
 *   depends on, in one program type-checked with the repository's own compiler options; relative `.ts` imports
 *   become `.js` (`rewriteRelativeImportExtensions`).
 * - `dist/package/` — the package: `package.json` with every export pointing at `dist/` (types and JavaScript),
 *   `README.md`, `dist/`, and `node_modules/@queuebox/<dep>/` for each QueueBox dependency, listed in
 *   `bundleDependencies`.
 *
 * Dependencies of the tarball are read from the compiled JavaScript, not guessed: a package that the code imports
 * statically is a dependency; one that it only loads on demand (`await import('…')`, such as PGlite for the
 * embedded store) is an optional peer; the packed package's own `peerDependencies` (the drivers `pg` and `mssql`)
 * stay peers. Versions come from the package.json that declares them; an import that no package declares fails the
 * pack.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SCOPE = '@queuebox/';

type Versions = Record<string, string>;

interface Manifest {
  readonly name: string;
  readonly version: string;
  readonly description?: string;
  readonly type?: string;
  readonly license?: string;
  readonly exports: Record<string, string>;
  readonly dependencies?: Versions;
  readonly peerDependencies?: Versions;
  readonly peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

/** A workspace package: its folder and its package.json. */
interface WorkspacePackage {
  readonly dir: string;
  readonly manifest: Manifest;
}

function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

function workspacePackages(): Map<string, WorkspacePackage> {
  const packages = new Map<string, WorkspacePackage>();
  for (const entry of readdirSync(join(ROOT, 'packages'))) {
    const dir = join(ROOT, 'packages', entry);
    if (!existsSync(join(dir, 'package.json'))) continue;
    const manifest = readJson<Manifest>(join(dir, 'package.json'));
    packages.set(manifest.name, { dir, manifest });
  }
  return packages;
}

/** The package and every `@queuebox/*` package it depends on, transitively; the package first. */
function closure(root: WorkspacePackage, all: Map<string, WorkspacePackage>): WorkspacePackage[] {
  const found = new Map<string, WorkspacePackage>([[root.manifest.name, root]]);
  const pending = [root];
  for (let current = pending.pop(); current !== undefined; current = pending.pop()) {
    for (const name of Object.keys(current.manifest.dependencies ?? {})) {
      if (!name.startsWith(SCOPE) || found.has(name)) continue;
      const dependency = all.get(name);
      if (!dependency)
        throw new Error(`${current.manifest.name} depends on ${name}, which is not in packages/`);
      found.set(name, dependency);
      pending.push(dependency);
    }
  }
  return [...found.values()];
}

/** `./src/a/b.ts` → `a/b` (the export's module path inside `src/`). */
function sourceModule(pkg: WorkspacePackage, target: string): string {
  const match = /^\.\/src\/(.+)\.ts$/.exec(target);
  if (!match?.[1]) throw new Error(`${pkg.manifest.name}: export ${target} is not a ./src/*.ts file`);
  return match[1];
}

/** Compiles every package of the closure in one program into `buildDir/<folder>/`; throws on any diagnostic. */
function compile(packages: readonly WorkspacePackage[], buildDir: string): void {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  );
  if (!config) throw new Error('tsconfig.json could not be read');
  const rootNames = packages.flatMap((pkg) =>
    Object.values(pkg.manifest.exports).map((target) => join(pkg.dir, target)),
  );
  const program = ts.createProgram({
    rootNames,
    options: {
      ...config.options,
      noEmit: false,
      declaration: true,
      rewriteRelativeImportExtensions: true,
      rootDir: join(ROOT, 'packages'),
      outDir: buildDir,
    },
  });
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...program.emit().diagnostics];
  if (diagnostics.length > 0) {
    throw new Error(
      ts.formatDiagnostics(diagnostics, {
        getCanonicalFileName: (name) => name,
        getCurrentDirectory: () => ROOT,
        getNewLine: () => '\n',
      }),
    );
  }
}

function filesBelow(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}

/** `pg/lib/x.js` → `pg`, `@scope/name/sub` → `@scope/name`. */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
}

function isBuiltin(specifier: string): boolean {
  return specifier.startsWith('node:') || builtinModules.includes(packageOf(specifier));
}

/** The third-party packages the compiled JavaScript imports statically, and those it only imports on demand. */
export function importsOf(javascript: readonly string[]): { static: Set<string>; onDemand: Set<string> } {
  const found = { static: new Set<string>(), onDemand: new Set<string>() };
  const note = (kind: keyof typeof found, specifier: ts.Node | undefined): void => {
    if (!specifier || !ts.isStringLiteralLike(specifier)) return;
    const text = specifier.text;
    if (text.startsWith('.') || isBuiltin(text)) return;
    found[kind].add(packageOf(text));
  };
  for (const text of javascript) {
    const visit = (node: ts.Node): void => {
      if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) note('static', node.moduleSpecifier);
      else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
        note('onDemand', node.arguments[0]);
      }
      ts.forEachChild(node, visit);
    };
    visit(ts.createSourceFile('module.js', text, ts.ScriptTarget.Latest, false, ts.ScriptKind.JS));
  }
  for (const name of found.static) found.onDemand.delete(name);
  return found;
}

/** The export map of a staged package: each `./src/x.ts` becomes types `./dist/x.d.ts` and code `./dist/x.js`. */
function distExports(pkg: WorkspacePackage): Record<string, { types: string; default: string }> {
  return Object.fromEntries(
    Object.entries(pkg.manifest.exports).map(([path, target]) => {
      const module = sourceModule(pkg, target);
      return [path, { types: `./dist/${module}.d.ts`, default: `./dist/${module}.js` }];
    }),
  );
}

function stagePackage(pkg: WorkspacePackage, buildDir: string, into: string, manifest: object): void {
  mkdirSync(into, { recursive: true });
  cpSync(join(buildDir, relative(join(ROOT, 'packages'), pkg.dir), 'src'), join(into, 'dist'), {
    recursive: true,
  });
  if (existsSync(join(pkg.dir, 'README.md'))) cpSync(join(pkg.dir, 'README.md'), join(into, 'README.md'));
  writeFileSync(join(into, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

/**
 * Runs npm (the one running this script when there is one) in `cwd` and answers its standard output. The
 * `npm_*` variables of an enclosing `npm run` are left out: `npm_config_local_prefix` and its kind would point
 * the child at this repository instead of `cwd`.
 */
export function npm(args: readonly string[], cwd: string, timeoutMs = 300_000): string {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
  const cli = process.env.npm_execpath;
  const [command, prefix] = cli?.endsWith('.js') ? [process.execPath, [cli]] : ['npm', []];
  return execFileSync(command, [...prefix, ...args], {
    cwd,
    env,
    encoding: 'utf8',
    timeout: timeoutMs,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Builds, stages and packs the package in `packageDir`; answers the tarball's path. */
export function pack(packageDir: string, outDir = join(packageDir, 'dist')): string {
  const all = workspacePackages();
  const root = [...all.values()].find((pkg) => pkg.dir === resolve(packageDir));
  if (!root) throw new Error(`${packageDir} is not a package folder under packages/`);
  const packages = closure(root, all);
  const bundled = packages.slice(1);

  const work = join(root.dir, 'dist');
  const buildDir = join(work, 'build');
  const stageDir = join(work, 'package');
  rmSync(buildDir, { recursive: true, force: true });
  rmSync(stageDir, { recursive: true, force: true });
  compile(packages, buildDir);

  const javascript = filesBelow(buildDir)
    .filter((file) => file.endsWith('.js'))
    .map((file) => readFileSync(file, 'utf8'));
  const imports = importsOf(javascript);
  const inPack = new Set(packages.map((pkg) => pkg.manifest.name));
  const missing = [...imports.static, ...imports.onDemand].filter(
    (name) => name.startsWith(SCOPE) && !inPack.has(name),
  );
  if (missing.length > 0) {
    throw new Error(
      `the compiled code imports ${missing.join(', ')}, which no package.json of the pack lists as a dependency`,
    );
  }
  const declared: Versions = {};
  for (const pkg of packages)
    Object.assign(declared, pkg.manifest.peerDependencies, pkg.manifest.dependencies);
  const versionOf = (name: string): string => {
    const version = declared[name];
    if (!version)
      throw new Error(`the compiled code imports ${name}, which no package.json of the pack declares`);
    return version;
  };

  const peers: Versions = { ...root.manifest.peerDependencies };
  const peersMeta: Record<string, { optional: boolean }> = {};
  for (const [name, meta] of Object.entries(root.manifest.peerDependenciesMeta ?? {})) {
    peersMeta[name] = { optional: meta.optional === true };
  }
  for (const name of [...imports.onDemand].sort()) {
    if (name in peers || name.startsWith(SCOPE)) continue;
    peers[name] = versionOf(name);
    peersMeta[name] = { optional: true };
  }
  const dependencies: Versions = {};
  for (const name of [...imports.static].sort()) {
    if (name in peers || name.startsWith(SCOPE)) continue;
    dependencies[name] = versionOf(name);
  }
  for (const pkg of bundled) dependencies[pkg.manifest.name] = pkg.manifest.version;

  const { name, version, description, type, license } = root.manifest;
  stagePackage(root, buildDir, stageDir, {
    name,
    version,
    description,
    type,
    license,
    exports: distExports(root),
    files: ['dist', 'README.md'],
    engines: readJson<{ engines?: object }>(join(ROOT, 'package.json')).engines,
    dependencies,
    bundleDependencies: bundled.map((pkg) => pkg.manifest.name),
    peerDependencies: peers,
    peerDependenciesMeta: peersMeta,
  });
  for (const pkg of bundled) {
    // Their third-party imports are the packed package's dependencies (above); inside the tarball they are
    // plain modules resolved from it.
    stagePackage(pkg, buildDir, join(stageDir, 'node_modules', pkg.manifest.name), {
      name: pkg.manifest.name,
      version: pkg.manifest.version,
      description: pkg.manifest.description,
      type: pkg.manifest.type,
      exports: distExports(pkg),
    });
  }

  mkdirSync(outDir, { recursive: true });
  const output = npm(['pack', stageDir, '--pack-destination', outDir, '--json', '--silent'], ROOT);
  const [result] = JSON.parse(output) as { filename: string }[];
  if (!result) throw new Error(`npm pack answered no tarball: ${output}`);
  return join(outDir, result.filename);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { out: { type: 'string' } },
  });
  const [packageDir] = positionals;
  if (!packageDir || positionals.length > 1) {
    console.error('usage: tsx scripts/pack.ts <package folder> [--out <folder>]');
    process.exit(2);
  }
  console.log(pack(resolve(packageDir), values.out === undefined ? undefined : resolve(values.out)));
}
