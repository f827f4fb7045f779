const test = require('node:test');
const assert = require('node:assert');
const isNumber = require('is-number');

test('a number is a number', () => { assert.ok(isNumber(5)); });
test('node is the version .nvmrc states', () => { assert.match(process.version, /^v20\./); });
