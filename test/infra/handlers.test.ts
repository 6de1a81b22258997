// Every function infra deploys names `functions/<name>.handler`: the file must exist and export `handler`.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FUNCTION_NAMES, handlerOf } from '@queuebox/deploy-contract';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');
const fileOf = (handler: string) => join(root, `${handler.slice(0, handler.lastIndexOf('.'))}.ts`);

/** Whether a module's source exports a value named `name` (declaration, export list or re-export). */
function exportsName(source: string, name: string): boolean {
  const file = ts.createSourceFile('handler.ts', source, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const exported = (node: ts.Node) =>
    ts.canHaveModifiers(node) &&
    (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
  return file.statements.some((statement) => {
    if (ts.isFunctionDeclaration(statement)) return exported(statement) && statement.name?.text === name;
    if (ts.isVariableStatement(statement)) {
      return (
        exported(statement) &&
        statement.declarationList.declarations.some((d) => ts.isIdentifier(d.name) && d.name.text === name)
      );
    }
    if (
      ts.isExportDeclaration(statement) &&
      statement.exportClause &&
      ts.isNamedExports(statement.exportClause)
    ) {
      return (
        !statement.isTypeOnly &&
        statement.exportClause.elements.some((e) => e.name.text === name && !e.isTypeOnly)
      );
    }
    return false;
  });
}

const present = FUNCTION_NAMES.filter((name) => existsSync(fileOf(handlerOf(name))));
// The handlers are written separately from infra; until the first one lands there is nothing to check.
const reason = 'no functions/<name>.ts handler exists yet';
if (present.length === 0) console.warn(`[infra handlers] skipped: ${reason}`);

describe.skipIf(present.length === 0)('handlers named by infra', () => {
  it.each([...FUNCTION_NAMES])('functions/%s.ts exists and exports handler', (name) => {
    // Prepare
    const file = fileOf(handlerOf(name));

    // Act
    const source = existsSync(file) ? readFileSync(file, 'utf8') : undefined;

    // Assess
    expect(source, `${file} is missing`).toBeDefined();
    expect(exportsName(source ?? '', 'handler'), `${file} does not export handler`).toBe(true);
  });
});

describe('exportsName', () => {
  it('finds exported functions, constants and export lists, and ignores types and locals', () => {
    expect(exportsName('export const handler = async () => {};', 'handler')).toBe(true);
    expect(exportsName('export async function handler() {}', 'handler')).toBe(true);
    expect(exportsName('const h = 1; export { h as handler };', 'handler')).toBe(true);
    expect(exportsName("export { handler } from './x.ts';", 'handler')).toBe(true);
    expect(exportsName('const handler = 1; export default handler;', 'handler')).toBe(false);
    expect(exportsName('export type handler = string;', 'handler')).toBe(false);
    expect(exportsName('export { type handler };', 'handler')).toBe(false);
  });
});
