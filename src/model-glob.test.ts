import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { globMatches, globToLike, isExactModel } from './model-glob.ts';

/** The pattern as LIKE would read it, applied in JavaScript: the SQL side of the rule, checked against globMatches. */
function likeMatches(like: string, value: string): boolean {
  let re = '';
  for (let i = 0; i < like.length; i++) {
    const c = like[i] ?? '';
    if (c === '\\') re += (like[++i] ?? '').replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    else if (c === '%') re += '.*';
    else if (c === '_') re += '.';
    else re += c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`, 's').test(value);
}

const TABLE: [pattern: string, model: string, matches: boolean][] = [
  ['gpt-4o', 'gpt-4o', true],
  ['gpt-4o', 'gpt-4o-mini', false],
  ['gpt-4o', 'gpt-4', false],
  ['gpt-4o*', 'gpt-4o-mini', true],
  ['gpt-4o*', 'gpt-4o', true],
  ['gpt-4o*', 'gpt-4', false],
  ['*', '', true],
  ['*', 'anything', true],
  ['*-mini', 'gpt-4o-mini', true],
  ['*-mini', 'gpt-4o-mini-2024', false],
  ['claude-*-sonnet', 'claude-3-5-sonnet', true],
  ['claude-*-sonnet', 'claude-3-7-sonnet', true],
  ['claude-*-sonnet', 'claude--sonnet', true],
  ['claude-*-sonnet', 'claude-sonnet', false],
  ['claude-*-sonnet', 'claude-3-5-sonnet-latest', false],
  ['claude-*-sonnet', 'claude-3-5-haiku', false],
  ['claude-*-sonnet*', 'claude-3-5-sonnet-latest', true],
  ['a*b*c', 'abc', true],
  ['a*b*c', 'aXbYc', true],
  ['a*b*c', 'acb', false],
  ['ab*ba', 'aba', false],
  ['ab*ba', 'abba', true],
  ['gpt_4%', 'gpt_4%', true],
  ['gpt_4%', 'gptX4Y', false],
  ['models/gemini-*', 'models/gemini-2.0-flash', true],
];

describe('model glob', () => {
  for (const [pattern, model, expected] of TABLE) {
    it(`${pattern} ${expected ? 'matches' : 'does not match'} ${JSON.stringify(model)}`, () => {
      assert.equal(globMatches(pattern, model), expected);
      assert.equal(likeMatches(globToLike(pattern), model), expected, `LIKE ${globToLike(pattern)}`);
    });
  }

  it('tells an exact model from a pattern', () => {
    assert.equal(isExactModel('gpt-4o'), true);
    assert.equal(isExactModel('gpt-4o*'), false);
    assert.equal(isExactModel('claude-*-sonnet'), false);
  });
});
