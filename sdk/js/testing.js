// A fake host for unit tests of JavaScript setters under `node --test`, with
// no component and no build: it serves the WIT imports that ./host.js uses
// (`nodestatus:plugin/host@0.1.1` and `wasi:filesystem/preopens@0.2.12`) from
// a description you pass, and records what the setter logged and the events
// it recorded.
//
//   import { fakeHost } from '../../../sdk/js/testing.js';
//   const host = fakeHost({ config: { maxLoadPerCpu: 1 }, system: { cpus: 4 },
//                           files: { '/proc/loadavg': '0.5 0.5 0.5 1/100 42\n' } });
//   const { setter } = await import('./setter.js');   // after fakeHost()
//   const part = JSON.parse(setter.set(JSON.stringify(node)));  // the fields it sets
//   const after = applySetter(setter, node);  // the Node as the host has it after the merge
//   host.events;  // [{ type, reason, message }]
//   host.parts;   // the parts its calls returned
//
// Call fakeHost() again to change the description between tests; the setter
// module sees the new one at once. Node.js only (it registers module hooks).

import { register } from 'node:module';

import { clone, isObject } from './src/json.js';
import { Node } from './src/node.js';
import { normalizePath } from './src/path.js';
import { now as nowTime } from './src/time.js';

const STATE = Symbol.for('nodestatus.fakeHost');

const HOST_EXPORTS = ['log', 'config', 'recordEvent', 'system', 'networkInterfaces', 'statvfs', 'nodeProblems'];

// Modules that forward every call to the current fake (so that a test can swap it).
const MODULES = {
  'nodestatus:plugin/host@0.1.1': HOST_EXPORTS.map(
    (n) => `export const ${n} = (...a) => globalThis[Symbol.for('nodestatus.fakeHost')].host.${n}(...a);`,
  ).join('\n'),
  'wasi:filesystem/preopens@0.2.12':
    "export const getDirectories = () => globalThis[Symbol.for('nodestatus.fakeHost')].preopens.getDirectories();",
};

const HOOKS = `
const modules = ${JSON.stringify(MODULES)};
export async function resolve(specifier, context, next) {
  if (Object.hasOwn(modules, specifier)) {
    return { url: 'data:text/javascript,' + encodeURIComponent(modules[specifier]), shortCircuit: true };
  }
  return next(specifier, context);
}`;

let registered = false;

/** What `throw new ComponentError(code)` looks like from a WIT import in componentize-js. */
class ComponentError extends Error {
  constructor(payload) {
    super(String(payload));
    this.name = 'ComponentError';
    this.payload = payload;
  }
}

const DEFAULT_SYSTEM = {
  hostname: 'test-node',
  kernelRelease: '6.1.0-test-amd64',
  kernelVersion: '#1 SMP PREEMPT_DYNAMIC Debian 6.1.0',
  machine: 'x86_64',
  osRelease: 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n',
  machineId: '0123456789abcdef0123456789abcdef',
  systemUuid: '00000000-0000-0000-0000-000000000000',
  bootId: '11111111-2222-3333-4444-555555555555',
  cpus: 4,
};

class FakeFile {
  constructor(bytes) {
    this.bytes = bytes;
  }
  read(len, offset) {
    const start = Number(offset);
    const chunk = this.bytes.slice(start, start + Number(len));
    return [chunk, start + chunk.length >= this.bytes.length];
  }
  stat() {
    return { type: 'regular-file', size: BigInt(this.bytes.length) };
  }
}

class FakeDir {
  constructor(fs, path, root) {
    this.fs = fs;
    this.path = path;
    this.root = root;
  }
  #resolve(rel) {
    if (rel.startsWith('/')) throw new ComponentError('not-permitted');
    const abs = normalizePath(this.path + '/' + rel);
    const r = this.root === '/' ? '' : this.root;
    if (abs !== this.root && !abs.startsWith(r + '/')) throw new ComponentError('not-permitted');
    return abs;
  }
  openAt(_pathFlags, rel, openFlags = {}, _flags) {
    const abs = this.#resolve(rel);
    if (this.fs.files.has(abs)) {
      if (openFlags.directory) throw new ComponentError('not-directory');
      return new FakeFile(this.fs.files.get(abs));
    }
    if (this.fs.isDir(abs)) return new FakeDir(this.fs, abs, this.root);
    throw new ComponentError('no-entry');
  }
  statAt(_pathFlags, rel) {
    const abs = this.#resolve(rel);
    if (this.fs.files.has(abs)) return { type: 'regular-file', size: BigInt(this.fs.files.get(abs).length) };
    if (this.fs.isDir(abs)) return { type: 'directory', size: 0n };
    throw new ComponentError('no-entry');
  }
  readDirectory() {
    const prefix = this.path === '/' ? '/' : this.path + '/';
    const names = new Map();
    for (const f of this.fs.files.keys()) {
      if (!f.startsWith(prefix)) continue;
      const [first, ...rest] = f.slice(prefix.length).split('/');
      names.set(first, rest.length ? 'directory' : 'regular-file');
    }
    const entries = [...names].map(([name, type]) => ({ name, type }));
    return { readDirectoryEntry: () => entries.shift() };
  }
}

/**
 * Installs (or replaces) the fake host. Every field is optional:
 * - `config`: the plugin's config object (what `plugins.<name>.config` holds);
 * - `system`: fields of system-info over a default (cpus: 4, ...);
 * - `files`: `{ '/abs/path': 'text' or Uint8Array }`, the host's files;
 * - `paths`: the directories granted (default: the first component of every
 *   file, e.g. `/proc`); `[]` grants nothing;
 * - `networkInterfaces`, `nodeProblems`: what those return;
 * - `statvfs`: `{ '/path': fsStats }` or a function `(path) => fsStats`.
 *
 * Returns `{ logs, events, parts }`, filled as the setter runs: logs are
 * `{ level, message }`, events `{ type, reason, message }`, parts the parts
 * its `set` calls returned (parsed).
 */
export function fakeHost(options = {}) {
  const files = new Map();
  for (const [p, v] of Object.entries(options.files ?? {})) {
    files.set(normalizePath(p), typeof v === 'string' ? new TextEncoder().encode(v) : v);
  }
  const fs = {
    files,
    isDir(abs) {
      const prefix = abs === '/' ? '/' : abs + '/';
      for (const f of files.keys()) if (f.startsWith(prefix)) return true;
      return false;
    },
  };
  const paths =
    options.paths ?? [...new Set([...files.keys()].map((f) => '/' + f.split('/')[1]))];
  const record = { logs: [], events: [], parts: [] };
  const system = { ...DEFAULT_SYSTEM, ...(options.system ?? {}) };
  globalThis[STATE] = {
    parts: record.parts,
    host: {
      log(level, message) {
        record.logs.push({ level, message });
      },
      config() {
        return JSON.stringify(options.config ?? {});
      },
      recordEvent(type, reason, message) {
        record.events.push({ type, reason, message });
      },
      system() {
        return { ...system };
      },
      networkInterfaces() {
        return structuredClone(options.networkInterfaces ?? []);
      },
      statvfs(path) {
        const s = typeof options.statvfs === 'function' ? options.statvfs(path) : options.statvfs?.[path];
        if (!s) throw new ComponentError(`${path} is not inside a granted path`);
        return s;
      },
      nodeProblems() {
        return [...(options.nodeProblems ?? [])];
      },
    },
    preopens: {
      getDirectories() {
        return paths.map((p) => [new FakeDir(fs, normalizePath(p), normalizePath(p)), p]);
      },
    },
  };
  if (!registered) {
    register('data:text/javascript,' + encodeURIComponent(HOOKS));
    registered = true;
  }
  return record;
}

/** The string maps of a Node, merged key by key. */
const MAPS = new Set(['metadata.labels', 'metadata.annotations', 'status.capacity', 'status.allocatable', 'status.nodeInfo']);

/**
 * The Node as the host has it after merging a setter's `part` into `node`
 * (neither is changed): a label, annotation, capacity, allocatable or
 * `nodeInfo` key is set, or removed when `null`; a condition replaces the one
 * of its type (or is appended), and `{ type, $patch: 'delete' }` removes it;
 * the host stamps the conditions' times (heartbeat `now`; transition `now`
 * only when the status changed); any other field is replaced whole, or
 * removed when `null`. `kind`, `apiVersion` and `metadata.name` are not
 * merged. `node` is a Node, an object or JSON text; `part` an object, JSON
 * text, or undefined/null (the WIT's `none`: nothing changes). What the host
 * does beyond one call (removing a field the setter set before and leaves
 * out now) is not done here.
 */
export function mergePart(node, part, now = nowTime()) {
  const object = typeof node === 'string' ? JSON.parse(node) : clone(node instanceof Node ? node.toJSON() : node);
  if (typeof part === 'string') part = JSON.parse(part);
  if (part === undefined || part === null) return new Node(object);
  if (!isObject(part)) throw new TypeError('a part is a JSON object');
  for (const [section, fields] of Object.entries(part)) {
    if (section === 'kind' || section === 'apiVersion' || !isObject(fields)) continue;
    if (!isObject(object[section])) object[section] = {};
    const target = object[section];
    for (const [key, value] of Object.entries(fields)) {
      if (section === 'metadata' && key === 'name') continue;
      if (MAPS.has(`${section}.${key}`) && isObject(value)) {
        if (!Object.hasOwn(target, key) && Object.values(value).every((v) => v === null)) continue; // no map made to remove from
        if (!isObject(target[key])) target[key] = {};
        for (const [k, v] of Object.entries(value)) {
          if (v === null) delete target[key][k];
          else target[key][k] = v;
        }
      } else if (section === 'status' && key === 'conditions' && Array.isArray(value)) {
        if (!Array.isArray(target.conditions)) target.conditions = [];
        const list = target.conditions;
        for (const c of value) {
          const at = list.findIndex((o) => isObject(o) && o.type === c.type);
          if (c.$patch === 'delete') {
            if (at >= 0) list.splice(at, 1);
            continue;
          }
          const old = at >= 0 ? list[at] : undefined;
          const kept = old && old.status === c.status && typeof old.lastTransitionTime === 'string' ? old.lastTransitionTime : now;
          const next = { ...clone(c), lastHeartbeatTime: now, lastTransitionTime: kept };
          if (at >= 0) list[at] = next;
          else list.push(next);
        }
      } else if (value === null) {
        delete target[key];
      } else {
        target[key] = clone(value);
      }
    }
  }
  return new Node(object);
}

/**
 * Runs `setter.set` (what `defineSetter` made) over `node` (a Node, an object
 * or JSON text) and returns the Node as the host has it after merging the
 * part (`mergePart`). Throws what the call throws (a string).
 */
export function applySetter(setter, node, now = nowTime()) {
  const text = typeof node === 'string' ? node : JSON.stringify(node instanceof Node ? node.toJSON() : node);
  return mergePart(text, setter.set(text), now);
}
