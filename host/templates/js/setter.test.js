// node --test
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { fakeHost } from './{{kit}}/sdk/js/testing.js';
import { Node } from './{{kit}}/sdk/js/nodestatus.js';

fakeHost({ files: { '{{grant}}/osrelease': '6.1.0-18-amd64\n' }, paths: ['{{grant}}'] }); // before the setter's module loads
const { setter, majorMinor, LABEL } = await import('./setter.js');

test('reads major.minor', () => {
  assert.equal(majorMinor('6.1.0-18-amd64'), '6.1');
  assert.equal(majorMinor('linux'), undefined);
});

test('labels the node', () => {
  const out = Node.parse(setter.set(Node.named('n').toString()));
  assert.equal(out.label(LABEL), '6.1');
});
