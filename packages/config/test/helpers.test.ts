import { describe, expect, it } from 'vitest';
import {
  closestMatch,
  editDistance,
  jsonPathProblem,
  parseJsonPath,
  renderTemplate,
  selectJsonPath,
  templatePlaceholders,
  templateProblems,
  topicMatches,
  topicPatternProblem,
} from '../src/index.ts';

describe('templates', () => {
  it('list placeholders once each, whatever the spacing', () => {
    expect(templatePlaceholders('a.{{source}}.{{  eventType }}.{{ source }}')).toEqual([
      'source',
      'eventType',
    ]);
    expect(templatePlaceholders('static.topic')).toEqual([]);
  });

  it('render values and leave missing ones empty', () => {
    expect(
      renderTemplate('{{ source }}.{{eventType}}', { source: 'stripe', eventType: 'charge.succeeded' }),
    ).toBe('stripe.charge.succeeded');
    expect(renderTemplate('{{ eventType }}', { eventType: null })).toBe('');
    expect(renderTemplate('x.{{ key }}', {})).toBe('x.');
  });

  it('name unknown, empty and unbalanced placeholders', () => {
    expect(templateProblems('{{ topic }}', ['source'])).toEqual([
      'uses {{ topic }}, which is not available here; use {{ source }}',
    ]);
    expect(templateProblems('{{ }}', ['source'])).toEqual(['has an empty placeholder "{{ }}"']);
    expect(templateProblems('a.{{ source', ['source'])).toEqual(['has an unmatched "{{" or "}}"']);
  });
});

describe('topic patterns', () => {
  it.each([
    ['orders.*', 'orders.created', true],
    ['orders.*', 'orders.created.v2', false],
    ['orders.#', 'orders', true],
    ['orders.#', 'orders.a.b', true],
    ['#', 'anything.at.all', true],
    ['*.created', 'orders.created', true],
    ['a.#.z', 'a.z', true],
    ['a.#.z', 'a.b.c.z', true],
    ['a.#.z', 'a.b.c', false],
    ['orders.created', 'orders.created', true],
    ['orders.created', 'orders.deleted', false],
  ])('%s matches %s: %s', (pattern, topic, expected) => {
    expect(topicMatches(pattern, topic)).toBe(expected);
  });

  it('accept whole-segment wildcards only', () => {
    expect(topicPatternProblem('a.*.#')).toBeUndefined();
    expect(topicPatternProblem('a.b*')).toContain('whole segments');
    expect(topicPatternProblem('a.')).toContain('empty segment');
  });
});

describe('JSON paths', () => {
  it('parse the supported steps', () => {
    expect(parseJsonPath('$.data.object.id')).toEqual(['data', 'object', 'id']);
    expect(parseJsonPath('$.items[0][\'a.b\']["c"]')).toEqual(['items', 0, 'a.b', 'c']);
    expect(parseJsonPath('$')).toEqual([]);
  });

  it('refuse anything else', () => {
    expect(parseJsonPath('data.id')).toBeUndefined();
    expect(parseJsonPath('$..id')).toBeUndefined();
    expect(jsonPathProblem('$.a[*]')).toContain('not a supported JSON path');
  });

  it('select values and answer undefined for a missing step', () => {
    const body = { data: { items: [{ id: 'x' }] } };
    expect(selectJsonPath(body, '$.data.items[0].id')).toBe('x');
    expect(selectJsonPath(body, '$.data.items[1].id')).toBeUndefined();
    expect(selectJsonPath(body, '$.data.items.id')).toBeUndefined();
  });
});

describe('did you mean', () => {
  it('counts a swap of neighbours as one edit', () => {
    expect(editDistance('kafak', 'kafka')).toBe(1);
    expect(editDistance('', 'abc')).toBe(3);
  });

  it('suggests only close candidates', () => {
    expect(closestMatch('maxAttempt', ['maxAttempts', 'batchSize'])).toBe('maxAttempts');
    expect(closestMatch('MAXATTEMPTS', ['maxAttempts'])).toBe('maxAttempts');
    expect(closestMatch('GET', ['POST', 'PUT', 'PATCH'])).toBeUndefined();
    expect(closestMatch('zzz', ['database'])).toBeUndefined();
  });
});
