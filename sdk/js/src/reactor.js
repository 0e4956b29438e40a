// A setter that also reacts between passes (WIT 0.2.1's `reactor`, world
// `reactor-plugin`): `defineReactor({ metadata, set, subscribe, onLines })`
// becomes the `setter` and `reactor` exports.

import { isObject } from './json.js';
import { defineSetter, runPart } from './setter.js';

const SOURCES = ['kmsg', 'file', 'journal'];

/**
 * One stream in WIT's shape, from
 * `{ name, source = 'kmsg', patterns = [], span = 1, lookbackSeconds = 0, extract, path, units }`:
 * `source` is `'kmsg'` (the kernel log), `'file'` (`path`, followed as
 * `tail -F` follows it) or `'journal'` (`units`: all entries when empty).
 */
function witStream(s) {
  if (!isObject(s) || typeof s.name !== 'string') throw new TypeError('a stream is { name, source, patterns, ... }');
  const source = s.source ?? 'kmsg';
  if (!SOURCES.includes(source)) {
    throw new TypeError(`stream ${JSON.stringify(s.name)}: source ${JSON.stringify(source)} is not kmsg, file or journal`);
  }
  return {
    name: s.name,
    source:
      source === 'kmsg' ? { tag: 'kmsg' } : source === 'file' ? { tag: 'file', val: String(s.path ?? '') } : { tag: 'journal', val: [...(s.units ?? [])] },
    patterns: [...(s.patterns ?? [])],
    span: s.span ?? 1,
    extract: s.extract ?? undefined,
    lookbackSeconds: BigInt(s.lookbackSeconds ?? 0),
  };
}

/**
 * What the host hands over (WIT `batch`), in JavaScript's numbers:
 * `{ matches: [{ stream, pattern, text, timeMs }], dropped }`.
 */
function jsLines(batch) {
  return {
    matches: (batch?.matches ?? []).map((m) => ({ stream: m.stream, pattern: m.pattern, text: m.text, timeMs: Number(m.timeMs) })),
    dropped: Number(batch?.dropped ?? 0),
  };
}

/**
 * Lines of one stream, each matched by `pattern`, written now, as the host
 * would hand them over: a test helper for `reactor.onLines(json, lines)`.
 */
export function linesOf(stream, pattern, ...texts) {
  const timeMs = Date.now();
  return { matches: texts.map((text) => ({ stream, pattern, text, timeMs })), dropped: 0 };
}

/**
 * Turns `{ metadata, set, subscribe, onLines }` into the `setter` and
 * `reactor` exports of the world `reactor-plugin`:
 *
 * ```js
 * export const { setter, reactor } = defineReactor({
 *   metadata: { name: 'xid-watch', version: '0.1.0' },
 *   set(node) { ... },
 *   subscribe: () => ({ streams: [{ name: 'kernel', source: 'kmsg', patterns: ['NVRM: Xid'] }] }),
 *   onLines(node, lines) { for (const m of lines.matches) { ... } },
 * });
 * ```
 *
 * `subscribe()` runs once at load, with the config readable: it returns
 * `{ streams, watch = [] }` (a stream: see {@link witStream}; `watch`:
 * granted paths whose change calls `set` at once). `onLines(node, lines)`
 * gets the Node and the matches (`{ matches: [{ stream, pattern, text,
 * timeMs }], dropped }`) and writes the plugin's part on the node, as `set`
 * does; the functions are called on `def`, so `this.set(node)` in
 * `onLines` is the plugin's own `set`. build.mjs builds a module that
 * exports `reactor` with the world `reactor-plugin`.
 */
export function defineReactor(def) {
  if (typeof def?.subscribe !== 'function') throw new TypeError('defineReactor needs a subscribe() function');
  if (typeof def.onLines !== 'function') throw new TypeError('defineReactor needs an onLines(node, lines) function');
  return {
    setter: defineSetter(def),
    reactor: {
      subscribe() {
        const s = def.subscribe();
        if (!isObject(s)) throw new TypeError('subscribe() must return { streams, watch }');
        return { streams: (s.streams ?? []).map(witStream), watch: [...(s.watch ?? [])] };
      },
      onLines(json, batch) {
        const lines = jsLines(batch);
        return runPart(json, (node) => def.onLines(node, lines), 'onLines()');
      },
    },
  };
}
