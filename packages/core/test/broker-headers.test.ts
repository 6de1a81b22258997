import { describe, expect, it } from 'vitest';
import { brokerPublishHeaders, MESSAGE_ID_HEADER } from '../src/index.ts';

describe('brokerPublishHeaders', () => {
  it("keeps the row's headers and adds message-id = the outbox id", () => {
    // Act
    const headers = brokerPublishHeaders({ id: '42', headers: { 'X-Trace': 't-1' } });
    // Assess
    expect(headers).toEqual({ 'X-Trace': 't-1', [MESSAGE_ID_HEADER]: '42' });
  });

  it('replaces a row header named message-id in any letter case', () => {
    // Act
    const headers = brokerPublishHeaders({
      id: '42',
      headers: { 'Message-ID': 'forged', 'message-id': 'x' },
    });
    // Assess
    expect(headers).toEqual({ 'message-id': '42' });
  });
});
