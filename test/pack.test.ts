/**
 * How scripts/pack.ts tells a tarball's dependencies from its compiled JavaScript (the whole pack runs in
 * packages/client/test/tarball.integration.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { importsOf } from '../scripts/pack.ts';

describe('importsOf', () => {
  it('splits static imports from imports on demand, by package, leaving out builtins and relative modules', () => {
    // Prepare
    const modules = [
      "import pg from 'pg';\nexport { x } from '@scope/lib/sub.js';\nimport './side-effect.js';\nimport 'node:fs';",
      "const { PGlite } = await import('@electric-sql/pglite');\nconst crypto = await import('crypto');",
      "export * from \"./local.js\";\nconst jsonata = (await import('jsonata')).default;\nimport 'pg/lib/x.js';",
      // A string that merely looks like an import is not one.
      'const text = "import nothing from \'not-a-dependency\'";',
    ];

    // Act
    const imports = importsOf(modules);

    // Assess
    expect([...imports.static].sort()).toEqual(['@scope/lib', 'pg']);
    expect([...imports.onDemand].sort()).toEqual(['@electric-sql/pglite', 'jsonata']);
  });

  it('counts a package imported both ways as static', () => {
    const imports = importsOf(["import a from 'mssql';", "await import('mssql');"]);

    expect([...imports.static]).toEqual(['mssql']);
    expect([...imports.onDemand]).toEqual([]);
  });
});
