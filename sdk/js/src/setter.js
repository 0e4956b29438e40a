// The setter export: `defineSetter({ metadata, set })` becomes the WIT
// world's `setter` interface (`nodestatus:plugin/setter@0.2.1`).

import { authorLocation, mapLocations } from '../sourcemap.js';
import { isObject } from './json.js';
import { Node } from './node.js';

const NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Fills in a plugin's metadata (`plugin-info`) with defaults and checks it:
 * `{ name, version, description = '', paths = [], env = [], affectsReadiness = false }`.
 */
export function pluginInfo(m) {
  if (!isObject(m)) throw new TypeError('metadata must be an object');
  const info = {
    name: m.name,
    version: m.version ?? '0.0.0',
    description: m.description ?? '',
    paths: [...(m.paths ?? [])],
    env: [...(m.env ?? [])],
    affectsReadiness: Boolean(m.affectsReadiness),
  };
  if (typeof info.name !== 'string' || !NAME.test(info.name)) {
    throw new TypeError(
      `metadata.name ${JSON.stringify(info.name)} must be lowercase letters, digits and '-', at most 63 bytes`,
    );
  }
  for (const p of info.paths) {
    if (typeof p !== 'string' || !p.startsWith('/')) {
      throw new TypeError(`metadata.paths: ${JSON.stringify(p)} is not an absolute path`);
    }
  }
  for (const k of ['version', 'description']) {
    if (typeof info[k] !== 'string') throw new TypeError(`metadata.${k} must be a string`);
  }
  return info;
}

/** The message of anything thrown: an Error's message, a string as is. */
export function errorMessage(e) {
  if (typeof e === 'string') return e;
  if (e instanceof Error) {
    // In a component built by build.mjs: where, in the author's files.
    const at = authorLocation(e.stack);
    return `${e.message || e.name}${at ? ` (at ${at})` : ''}`;
  }
  if (isObject(e) && typeof e.payload === 'string') return e.payload;
  try {
    return JSON.stringify(e) ?? String(e);
  } catch {
    return String(e);
  }
}

/**
 * Turns `{ metadata, set }` into the `setter` export of the WIT world:
 *
 * ```js
 * export const setter = defineSetter({
 *   metadata: { name: 'my-setter', version: '0.1.0', paths: ['/proc'] },
 *   set(node) { node.setLabel('example.com/x', 'y'); },
 * });
 * ```
 *
 * `metadata` is an object (or a function returning one); see {@link pluginInfo}.
 * `set(node)` receives a {@link Node} and changes it in place (its return
 * value is ignored, unless it is another Node, which is then used). The
 * export `set(json)` returns the setter's part of the node as JSON text
 * (WIT `nodestatus:plugin@0.2.1`: `ok(some(part))`, `node.part()`): every
 * field `set(node)` wrote. Anything it throws becomes the `err` result with
 * the error's message, so the host discards the output and reports the
 * message. `set` must be synchronous. Under `node --test`, `applySetter` of
 * ./testing.js gives the node as the host has it after merging the part.
 */
export function defineSetter({ metadata, set }) {
  if (typeof set !== 'function') throw new TypeError('defineSetter needs a set(node) function');
  const info = () => pluginInfo(typeof metadata === 'function' ? metadata() : metadata);
  if (typeof metadata !== 'function') info(); // fail at once, and in unit tests, on bad metadata
  return {
    metadata() {
      try {
        return info();
      } catch (e) {
        // A failed metadata() traps, and the engine logs what it printed:
        // say where, in the author's files.
        const err = new Error(`metadata() failed: ${errorMessage(e)}`);
        err.stack = mapLocations(String(e?.stack ?? ''));
        throw err;
      }
    },
    set(json) {
      return runPart(json, set, 'set()');
    },
  };
}

/**
 * Runs `fn(node)` over a Node's JSON and returns the part it wrote as JSON
 * text: `set`'s export, and a reactor's `onLines` (./reactor.js). `what`
 * names `fn` in its errors.
 */
export function runPart(json, fn, what) {
  // componentize-js turns a thrown string into the `err` result (a thrown
  // Error object would trap instead), so every failure is thrown as one.
  let node;
  try {
    node = Node.parse(json);
  } catch (e) {
    throw `the host passed a node that is not a Node object: ${errorMessage(e)}`;
  }
  let out;
  try {
    out = fn(node);
  } catch (e) {
    throw errorMessage(e);
  }
  if (out && typeof out.then === 'function') {
    throw `${what} returned a Promise: a setter must be synchronous (the host API is)`;
  }
  const done = out instanceof Node ? out : node;
  const where = done.untrackedChange();
  if (where !== undefined) {
    throw `the setter changed ${where} in node.object (or in a value that node.status() or node.metadata() returned): the SDK cannot tell which fields it sets; change it with the Node's helpers (setLabel, setCondition, setCapacity, ...) or node.statusMut()`;
  }
  // The part only, never the whole node: componentize-js's binding
  // measures the returned string in interpreted JavaScript, so its
  // length is the cost.
  const part = done.partJson();
  // Under ./testing.js's fake host, its record keeps the parts.
  globalThis[Symbol.for('nodestatus.fakeHost')]?.parts?.push(JSON.parse(part));
  return part;
}
