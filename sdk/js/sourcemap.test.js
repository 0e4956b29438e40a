// node --test sdk/js: the source map decoder on esbuild-style mappings.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { authorLocation, decodeMappings, mapLocations, originalLocation } from './sourcemap.js';

// Generated line 1: col 0 -> src 0 line 0 col 0; col 4 -> src 0 line 2 col 6.
// Generated line 2: col 2 -> src 1 line 9 col 0.
const MAP = { sources: ['../../sdk/js/host.js', 'setter.js'], mappings: 'AAAA,IAEM;ECON' };

test('decodes VLQ mappings', () => {
  assert.deepEqual(decodeMappings(MAP.mappings), [
    [
      [0, 0, 0, 0],
      [4, 0, 2, 6],
    ],
    [[2, 1, 9, 0]],
  ]);
});

test('maps bundle locations to the author files', () => {
  const map = { sources: MAP.sources, lines: decodeMappings(MAP.mappings) };
  assert.equal(originalLocation(1, 5, map), '../../sdk/js/host.js:3:7');
  assert.equal(originalLocation(2, 3, map), 'setter.js:10:1');
  assert.equal(originalLocation(9, 1, map), undefined);
  const stack = 'readFile@/tmp/x/setter.bundle.js:1:5\nset@/tmp/x/setter.bundle.js:2:3\n';
  assert.equal(mapLocations(stack, map), 'readFile@../../sdk/js/host.js:3:7\nset@setter.js:10:1\n');
  // The first frame outside the SDK: the author's own line.
  assert.equal(authorLocation(stack, map), 'setter.js:10:1');
  assert.equal(authorLocation('no frames here', map), undefined);
});
