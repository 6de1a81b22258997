import { createSecretCopies, type SecretCopy } from './secret-copies.ts';
import type { SecretsPlan } from './secrets-plan.ts';

// One sst.Secret per `secret://name#key` the configuration references (set with `npx sst secret set <Name>`),
// copied into Secrets Manager under `<app>/<stage>/<name>` where the functions' loadConfig() reads it.

/** The secrets the functions read. */
export interface Secrets {
  readonly copies: SecretCopy[];
  /** ARNs of the copies, for the functions' policies. */
  readonly arns: $util.Output<string>[];
  /** sst.Secret by name, e.g. `StripeWebhook`. */
  readonly sst: Record<string, sst.Secret>;
}

/** Declares the sst.Secret values and creates their Secrets Manager copies. */
export function createSecrets(plan: SecretsPlan): Secrets {
  const declared: Record<string, sst.Secret> = {};
  for (const managed of plan.managed) {
    for (const name of managed.whole ? [managed.whole.sstName] : managed.keys.map((k) => k.sstName)) {
      declared[name] = new sst.Secret(name);
    }
  }
  const values = Object.fromEntries(Object.entries(declared).map(([name, secret]) => [name, secret.value]));
  const copies = createSecretCopies(plan.managed, values);
  return { copies, arns: copies.map((c) => c.secret.arn), sst: declared };
}
