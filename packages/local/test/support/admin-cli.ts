/** The admin CLI's tests' way to run one planned command against a store and read what it wrote. */
import type { Store } from '@queuebox/core';
import { type AdminPlan, runAdminCommand } from '../../src/admin-cli.ts';

/** Runs `plan` (as `queuebox …` would, `--json` with `json`) and answers its exit code, stdout and stderr. */
export async function runCliCommand(
  store: Pick<Store, 'admin' | 'outbox' | 'inbox'>,
  plan: AdminPlan,
  json = false,
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runAdminCommand(store, plan, {
    out: (text) => (stdout += text),
    err: (text) => (stderr += text),
    json,
  });
  return { code, stdout, stderr };
}
