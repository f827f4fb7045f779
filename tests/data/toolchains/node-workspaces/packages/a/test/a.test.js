const test = require('node:test');
const assert = require('node:assert');
const a = require('a');

test('a doubles numbers through its sibling b', () => { assert.strictEqual(a(2), 4); });
