// The setter export: `defineSetter({ metadata, set })` becomes the WIT
// world's `setter` interface.

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
 * value is ignored, unless it is another Node, which is then returned). Anything
 * it throws becomes the `err` result with the error's message, so the host
 * discards the output and reports the message. `set` must be synchronous.
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
        out = set(node);
      } catch (e) {
        throw errorMessage(e);
      }
      if (out && typeof out.then === 'function') {
        throw 'set() returned a Promise: a setter must be synchronous (the host API is)';
      }
      return (out instanceof Node ? out : node).toString();
    },
  };
}
