// Stands in for the `bun` module in the infra type check (tsconfig.infra.json `paths`). SST's config.ts imports
// only the type `Shell` from it, for `$shell`, which QueueBox does not use. The real `@types/bun` would also load
// Bun's globals, which sst.config.ts does not run under (Pulumi's Node.js language host runs it) and which
// redeclare `URL` so that Node's `new URL()` no longer fits the type `URL` in our packages.
export type Shell = (strings: TemplateStringsArray, ...values: unknown[]) => Promise<unknown>;
