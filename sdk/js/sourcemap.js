// Maps locations in the bundle that build.mjs makes (setter.bundle.js) back
// to the author's files, with the source map that build.mjs embeds in the
// bundle (globalThis[Symbol.for('nodestatus.sourceMap')]). Used for the
// errors a setter reports: inside the component a stack frame says
// `set@setter.bundle.js:412:11`; the author wants `setter.js:48:37`.

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Decodes a source map's `mappings` into, per generated line, sorted
 *  `[generatedColumn, sourceIndex, originalLine, originalColumn]` segments. */
export function decodeMappings(mappings) {
  const lines = [];
  let source = 0;
  let line = 0;
  let column = 0;
  for (const text of mappings.split(';')) {
    const segments = [];
    let generated = 0;
    for (const seg of text.split(',')) {
      if (!seg) continue;
      const values = [];
      let value = 0;
      let shift = 0;
      for (const ch of seg) {
        const digit = BASE64.indexOf(ch);
        if (digit < 0) throw new Error(`invalid source map character ${ch}`);
        value += (digit & 31) << shift;
        if (digit & 32) {
          shift += 5;
        } else {
          values.push(value & 1 ? -(value >>> 1) : value >>> 1);
          value = 0;
          shift = 0;
        }
      }
      generated += values[0];
      if (values.length >= 4) {
        source += values[1];
        line += values[2];
        column += values[3];
        segments.push([generated, source, line, column]);
      }
    }
    lines.push(segments);
  }
  return lines;
}

let decoded;

function current() {
  const map = globalThis[Symbol.for('nodestatus.sourceMap')];
  if (!map) return undefined;
  decoded ??= { sources: map.sources, lines: decodeMappings(map.mappings) };
  return decoded;
}

/** The author's `source:line:column` for 1-based `line` and `column` of the
 *  bundle, or undefined without a map. */
export function originalLocation(line, column, map = current()) {
  const segments = map?.lines[line - 1];
  if (!segments?.length) return undefined;
  let best;
  for (const s of segments) {
    if (s[0] <= column - 1) best = s;
    else break;
  }
  best ??= segments[0];
  return `${map.sources[best[1]]}:${best[2] + 1}:${best[3] + 1}`;
}

const FRAME = /([^\s@()]*setter\.bundle\.js):(\d+):(\d+)/g;

/** `text` with every bundle location replaced by the author's. */
export function mapLocations(text, map = current()) {
  if (!map || typeof text !== 'string') return text;
  return text.replace(FRAME, (all, _file, line, column) => originalLocation(Number(line), Number(column), map) ?? all);
}

/** The first location in `stack` outside the SDK (the author's own code),
 *  mapped; else the first one; undefined without a map or a bundle frame. */
export function authorLocation(stack, map = current()) {
  if (!map || typeof stack !== 'string') return undefined;
  const found = [];
  for (const m of stack.matchAll(FRAME)) {
    const loc = originalLocation(Number(m[2]), Number(m[3]), map);
    if (loc) found.push(loc);
  }
  return found.find((l) => !/(^|\/)sdk\/js\//.test(l)) ?? found[0];
}
