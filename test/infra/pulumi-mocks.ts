// Pulumi mocks for infra tests: every resource registered is recorded with its inputs, as Pulumi would send them
// to the engine; data sources answer their own inputs plus what a test says they return. No engine, no AWS.
import * as pulumi from '@pulumi/pulumi';
import { beforeAll, beforeEach } from 'vitest';

/** One registered resource. */
export interface Registered {
  readonly type: string;
  readonly name: string;
  readonly inputs: Record<string, unknown>;
}

/** The outputs of data-source calls by token, e.g. `aws:ec2/getSubnet:getSubnet` → `{ vpcId }`. */
export type CallResults = Readonly<Record<string, Record<string, unknown>>>;

/** Installs the mocks for the file's tests (before all) and clears the record before each test. */
export function usePulumiMocks(calls: CallResults = {}) {
  const registered: Registered[] = [];
  beforeAll(() => {
    pulumi.runtime.setMocks(
      {
        newResource(args) {
          registered.push({ type: args.type, name: args.name, inputs: args.inputs });
          const name = typeof args.inputs.name === 'string' ? args.inputs.name : `${args.name}-generated`;
          return {
            id: `${args.name}-id`,
            state: { ...args.inputs, name, arn: `arn:aws:mock:eu-west-1:123456789012:${args.type}/${name}` },
          };
        },
        call(args) {
          return { ...args.inputs, ...calls[args.token] };
        },
      },
      'queuebox',
      'test',
      false,
    );
  });
  beforeEach(() => {
    registered.length = 0;
  });

  /** Waits until the resources are registered, then returns the inputs of those of `type`, by name. */
  async function inputsOf(resources: readonly pulumi.Resource[], type: string): Promise<Registered[]> {
    await Promise.all(resources.map((r) => resolved(r.urn)));
    return registered.filter((r) => r.type === type).sort((a, b) => a.name.localeCompare(b.name));
  }
  return { registered, inputsOf, resolved };
}

/** The value of an output, once known. */
export function resolved<T>(output: pulumi.Output<T>): Promise<T> {
  return new Promise((resolve) => output.apply((value) => resolve(value)));
}
