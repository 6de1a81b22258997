/** `lazySdkClient`: the SDK package and its client are made once, shared, and only QueueBox's own is destroyed. */
import { describe, expect, it } from 'vitest';
import { lazySdkClient } from '../src/aws-client.ts';

class FakeClient {
  destroyed = 0;
  destroy() {
    this.destroyed++;
  }
}

describe('lazySdkClient', () => {
  it('loads the package and makes the client once for every request, and again after close', async () => {
    let loads = 0;
    const made: FakeClient[] = [];
    const aws = lazySdkClient(
      async () => {
        loads++;
        return { Client: FakeClient };
      },
      ({ Client }) => {
        const client = new Client();
        made.push(client);
        return client;
      },
    );
    expect(loads).toBe(0);
    const answers = await Promise.all([aws.get(), aws.get(), aws.get()]);
    expect(loads).toBe(1);
    expect(made).toHaveLength(1);
    for (const answer of answers) expect(answer.client).toBe(made[0]);

    await aws.close();
    expect(made[0]?.destroyed).toBe(1);
    await aws.close();
    expect(made[0]?.destroyed).toBe(1);

    const again = await aws.get();
    expect(loads).toBe(2);
    expect(made).toHaveLength(2);
    expect(again.client).toBe(made[1]);
  });

  it("uses the caller's client and never destroys it", async () => {
    const given = new FakeClient();
    let makes = 0;
    const aws = lazySdkClient(
      async () => ({ Client: FakeClient }),
      ({ Client }) => {
        makes++;
        return new Client();
      },
      given,
    );
    expect((await aws.get()).client).toBe(given);
    await aws.close();
    expect(given.destroyed).toBe(0);
    expect(makes).toBe(0);
  });

  it('keeps a failed load until close, then tries again', async () => {
    let loads = 0;
    const aws = lazySdkClient(
      async () => {
        loads++;
        if (loads === 1) throw new Error('Cannot find package');
        return { Client: FakeClient };
      },
      ({ Client }) => new Client(),
    );
    await expect(aws.get()).rejects.toThrow('Cannot find package');
    await expect(aws.get()).rejects.toThrow('Cannot find package');
    expect(loads).toBe(1);
    await aws.close();
    expect((await aws.get()).client).toBeInstanceOf(FakeClient);
    expect(loads).toBe(2);
  });
});
