import { describe, expect, it } from 'vitest';
import {
  DESTINATION_TEMPLATE_PLACEHOLDERS,
  defaultSourceTopicTemplate,
  renderTemplate,
  SOURCE_TEMPLATE_PLACEHOLDERS,
  templatePlaceholders,
  templateProblems,
  templateUses,
} from '../src/index.ts';

describe('templatePlaceholders', () => {
  it('lists placeholders once each, whatever the spacing', () => {
    expect(templatePlaceholders('a.{{source}}.{{  eventType }}.{{ source }}')).toEqual([
      'source',
      'eventType',
    ]);
    expect(templatePlaceholders('static.topic')).toEqual([]);
  });

  it('tells whether a template uses a placeholder', () => {
    expect(templateUses('orders.{{eventType}}', 'eventType')).toBe(true);
    expect(templateUses('orders.{{ source }}', 'eventType')).toBe(false);
  });
});

describe('renderTemplate', () => {
  it('renders values and leaves missing ones empty', () => {
    expect(
      renderTemplate('{{ source }}.{{eventType}}', { source: 'stripe', eventType: 'charge.succeeded' }),
    ).toBe('stripe.charge.succeeded');
    expect(renderTemplate('{{ eventType }}', { eventType: null })).toBe('');
    expect(renderTemplate('x.{{ key }}', {})).toBe('x.');
    expect(renderTemplate('{{source}}-{{eventType}}', { source: 's', eventType: null })).toBe('s-');
  });

  it('renders destination templates (routing keys, subjects) from the topic and key', () => {
    expect(renderTemplate('{{ topic }}', { topic: 'orders.created', key: 'k' })).toBe('orders.created');
    expect(renderTemplate('x.{{key}}.{{ topic }}', { topic: 't', key: null })).toBe('x..t');
    expect(renderTemplate('events.{{ topic }}.{{ key }}', { topic: 'a.b', key: 'k' })).toBe('events.a.b.k');
  });

  it('renders a placeholder that is not a value (or an inherited name) as empty', () => {
    expect(renderTemplate('a.{{ other }}.{{ constructor }}', { topic: 't' })).toBe('a..');
  });
});

describe('templateProblems', () => {
  it('names unknown, empty and unbalanced placeholders', () => {
    expect(templateProblems('{{ topic }}', ['source'])).toEqual([
      'uses {{ topic }}, which is not available here; use {{ source }}',
    ]);
    expect(templateProblems('{{ }}', ['source'])).toEqual(['has an empty placeholder "{{ }}"']);
    expect(templateProblems('a.{{ source', ['source'])).toEqual(['has an unmatched "{{" or "}}"']);
  });

  it('names a stray closing "}}" as unmatched, alone or after a placeholder', () => {
    expect(templateProblems('orders}}', ['source'])).toEqual(['has an unmatched "{{" or "}}"']);
    expect(templateProblems('{{ source }}.x}}', ['source'])).toEqual(['has an unmatched "{{" or "}}"']);
  });

  it('accepts source topics with {{ source }} and {{ eventType }} only', () => {
    expect(templateProblems('{{ source }}.{{ eventType }}', SOURCE_TEMPLATE_PLACEHOLDERS)).toEqual([]);
    expect(templateProblems('{{ topic }}', SOURCE_TEMPLATE_PLACEHOLDERS)).toHaveLength(1);
    expect(templateProblems('a.{{ source', SOURCE_TEMPLATE_PLACEHOLDERS)).toHaveLength(1);
  });

  it('accepts destination templates with {{ topic }} and {{ key }} only', () => {
    expect(templateProblems('x.{{ topic }}.{{key}}', DESTINATION_TEMPLATE_PLACEHOLDERS)).toEqual([]);
    expect(templateProblems('{{ eventType }}', DESTINATION_TEMPLATE_PLACEHOLDERS)).toHaveLength(1);
  });
});

describe('defaultSourceTopicTemplate', () => {
  it('is {{ eventType }} for HTTP and {{ source }} for broker sources', () => {
    expect(defaultSourceTopicTemplate('http')).toBe('{{ eventType }}');
    for (const type of ['amqp', 'kafka', 'nats'])
      expect(defaultSourceTopicTemplate(type)).toBe('{{ source }}');
  });
});
