/**
 * The type check of `sst.config.ts` and `infra/` against SST's own types (`.sst/platform`, written by
 * scripts/sst-types.sh). Exit 0 when clean, 1 with every diagnostic otherwise.
 *
 *   npx tsx scripts/typecheck-infra.ts            what `npm run typecheck:infra` runs
 *   npx tsx scripts/typecheck-infra.ts --probe    adds `const n: number = sst;` to infra/: must fail (exit 1)
 *
 * Why not plain `tsc -p tsconfig.infra.json`: SST's `config.d.ts` and `src/global.d.ts` import their siblings
 * without extensions (`./src/config`), which resolve only under the resolution SST's own platform tsconfig uses
 * (`module: esnext`, `moduleResolution: bundler`); under `nodenext` they do not resolve, `skipLibCheck` hides that,
 * and `sst`, `$config` and every component type become `any` (a probe `const n: number = sst;` type-checked clean).
 * tsconfig.infra.json now uses SST's resolution, and this script makes sure it can never silently go hollow again:
 *
 * - it reports every diagnostic of our files (sst.config.ts, infra/ and the packages they import), the program's
 *   global and option diagnostics, and fails on any;
 * - it adds a sentinel file to infra/ (in memory) whose lines must each fail to type-check, marked
 *   `@ts-expect-error`: when `sst`, `$config`, `$util`, `aws`, an SST component's arguments or `@pulumi/aws` turn
 *   into `any`, the expected error disappears and TypeScript reports the unused directive (TS2578);
 * - it fails when sst.config.ts or an infra/*.ts file is not part of the program.
 *
 * Diagnostics inside SST's and Pulumi's own sources are not ours to fix (SST compiles them with its own, looser
 * settings) and are not requested: TypeScript checks a file's bodies only when asked for its diagnostics, so
 * checking only our files is also what keeps this fast.
 */
import { readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** Lines that must each fail to type-check while SST's types resolve; one per way the check went hollow. */
export const SENTINELS: readonly { readonly why: string; readonly code: string }[] = [
  { why: '`sst` is SST component namespace, not any', code: 'export const sentinelSst: number = sst;' },
  {
    why: "$config's input is typed (the app name is a string)",
    code: 'export const sentinelConfig = $config({ app: () => ({ name: 1 }), async run() {} });',
  },
  {
    why: "sst.aws.Aurora's vpc is typed ({ subnets, securityGroups }, not the functions' shape)",
    code: "export const sentinelAurora = new sst.aws.Aurora('Sentinel', { engine: 'postgres', vpc: { privateSubnets: [], securityGroups: [] } });",
  },
  {
    why: "sst.aws.Function's arguments are typed",
    code: "export const sentinelFunction = new sst.aws.Function('Sentinel', { handler: 1 });",
  },
  { why: '`$util` is @pulumi/pulumi', code: 'export const sentinelUtil: number = $util.output(1);' },
  {
    why: 'the global `aws` is @pulumi/aws',
    code: 'export const sentinelAws: number = aws.getRegionOutput();',
  },
  {
    why: 'an imported @pulumi/aws resolves',
    code: "export const sentinelImport: number = new (await import('@pulumi/aws')).sns.Topic('Sentinel');",
  },
];

/** The in-memory sentinel file, under infra/ so it sees exactly what infra/ sees. */
export function sentinelSource(): string {
  return `${SENTINELS.map((s) => `// ${s.why}\n// @ts-expect-error\n${s.code}\n`).join('')}`;
}

/** Options of {@link checkInfraTypes}. */
export interface CheckInfraTypesOptions {
  /** The repository root. Default: the parent of this script's folder. */
  readonly root?: string;
  /** Extra files (absolute path → text) added to the program, e.g. a probe. */
  readonly extraFiles?: Readonly<Record<string, string>>;
  /** Leave the sentinel file out (only to show what it guards). Default false. */
  readonly withoutSentinels?: boolean;
}

/** What the check found. */
export interface InfraTypeReport {
  readonly ok: boolean;
  /** Every diagnostic, formatted as tsc prints it. */
  readonly diagnostics: readonly string[];
  /** Our files whose diagnostics were checked, relative to the root. */
  readonly checkedFiles: readonly string[];
}

const SENTINEL_FILE = 'infra/__sst-type-sentinels__.ts';

/** Type-checks sst.config.ts and infra/ with tsconfig.infra.json. */
export function checkInfraTypes(options: CheckInfraTypesOptions = {}): InfraTypeReport {
  const root = options.root ?? resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const extra: Record<string, string> = { ...options.extraFiles };
  if (!options.withoutSentinels) extra[join(root, SENTINEL_FILE)] = sentinelSource();
  const configPath = join(root, 'tsconfig.infra.json');
  const problems: ts.Diagnostic[] = [];
  const read = ts.readConfigFile(configPath, ts.sys.readFile);
  if (read.error) problems.push(read.error);
  const parsed = ts.parseJsonConfigFileContent(read.config ?? {}, ts.sys, root, undefined, configPath);
  problems.push(...parsed.errors);
  const host = ts.createCompilerHost(parsed.options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.getSourceFile = (fileName, language, onError, shouldCreate) => {
    const text = extra[resolve(fileName)];
    return text !== undefined
      ? ts.createSourceFile(fileName, text, language)
      : getSourceFile(fileName, language, onError, shouldCreate);
  };
  host.fileExists = (fileName) => extra[resolve(fileName)] !== undefined || fileExists(fileName);
  const program = ts.createProgram({
    rootNames: [...parsed.fileNames, ...Object.keys(extra)],
    options: parsed.options,
    host,
  });

  const ours = program.getSourceFiles().filter((file) => {
    const path = relative(root, file.fileName);
    return !path.startsWith('..') && !path.split(/[\\/]/).some((p) => p === 'node_modules' || p === '.sst');
  });
  problems.push(...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics());
  for (const file of ours) {
    problems.push(...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file));
  }

  const checkedFiles = ours.map((f) => relative(root, f.fileName)).sort();
  const messages = ts.sortAndDeduplicateDiagnostics(problems).map((d) =>
    ts.formatDiagnostic(d, {
      getCanonicalFileName: (f) => f,
      getCurrentDirectory: () => root,
      getNewLine: () => '\n',
    }),
  );
  const expected = ['sst.config.ts', ...infraFiles(root)];
  for (const file of expected) {
    if (!checkedFiles.includes(file)) messages.push(`${file} is not part of the infra type check\n`);
  }
  return { ok: messages.length === 0, diagnostics: messages, checkedFiles };
}

function infraFiles(root: string): string[] {
  return readdirSync(join(root, 'infra'), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => join('infra', name));
}

/** The probe that issue 14 found type-checking clean: SST's `sst` global assigned to a number. */
export const PROBE = { file: 'infra/__probe__.ts', text: 'export const n: number = sst;\n' } as const;

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const probe = process.argv.includes('--probe');
  const started = Date.now();
  const report = checkInfraTypes({
    root,
    ...(probe ? { extraFiles: { [join(root, PROBE.file)]: PROBE.text } } : {}),
  });
  for (const line of report.diagnostics) process.stderr.write(line);
  const infra = report.checkedFiles.filter((f) => f === 'sst.config.ts' || f.startsWith('infra/')).length;
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log(
    `typecheck-infra: ${report.ok ? 'clean' : `${report.diagnostics.length} problem(s)`}; ${report.checkedFiles.length} files of ours checked (${infra} in sst.config.ts and infra/, ${SENTINELS.length} sentinels) in ${seconds} s`,
  );
  process.exitCode = report.ok ? 0 : 1;
}
