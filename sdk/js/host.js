// The host's side of a JavaScript setter: the functions of the WIT interface
// `nodestatus:plugin/host@0.1.1` in JavaScript's shapes, and reading the files
// the operator granted (WASI preopens; JavaScript in the component has no `fs`).
//
// Only the component can load this module (its imports are WIT interfaces);
// under `node --test`, ./testing.js serves fakes for them.

import * as wit from 'nodestatus:plugin/host@0.1.1';
import { getDirectories } from 'wasi:filesystem/preopens@0.2.12';
import { normalizePath } from './src/path.js';

/** The WASI version of the filesystem imports above; sdk/js/build.mjs builds against it. */
export const WASI_VERSION = '0.2.12';

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];

/**
 * Writes one line to the host's log, tagged with the plugin's name:
 * `log('info', 'message')`, or `log.info('message')`, `log.warn(...)`, ...
 * Lines over 4 KiB are cut; past 100 lines in one call the rest are dropped.
 */
export function log(level, message) {
  if (!LEVELS.includes(level)) throw new TypeError(`log level must be one of ${LEVELS.join(', ')}`);
  wit.log(level, String(message));
}
for (const level of LEVELS) log[level] = (message) => log(level, message);

/**
 * The plugin's own configuration from the operator's config file
 * (`plugins.<name>.config`), parsed, over `defaults`.
 */
export function config(defaults = {}) {
  const text = wit.config();
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new Error(`the host's config is not JSON: ${e.message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new Error('config must be an object');
  }
  return { ...defaults, ...parsed };
}

/** Event types for {@link recordEvent}. */
export const EventType = Object.freeze({ Normal: 'normal', Warning: 'warning' });

/**
 * Records a Kubernetes Event about this node. `type` is `EventType.Normal` or
 * `EventType.Warning` (as in the Python SDK; the strings `'Normal'` and
 * `'Warning'`, in any case, work too); `reason` is UpperCamelCase (at most
 * 128 bytes); `message` at most 1 KiB. The host rate-limits events per plugin.
 */
export function recordEvent(type, reason, message) {
  const t = String(type).toLowerCase();
  if (t !== EventType.Normal && t !== EventType.Warning) {
    throw new TypeError(`event type must be EventType.Normal or EventType.Warning, got ${String(type)}`);
  }
  wit.recordEvent(t, String(reason), String(message));
}

/**
 * The machine's facts: `{ hostname, kernelRelease, kernelVersion, machine,
 * osRelease, machineId, systemUuid, bootId, cpus }`.
 */
export function system() {
  return wit.system();
}

/** The host's network interfaces: `[{ name, up, loopback, addresses: [{ address, prefixLen }] }]`. */
export function networkInterfaces() {
  return wit.networkInterfaces();
}

/**
 * `statvfs(3)` of the filesystem that holds `path` (inside a granted path):
 * `{ totalBytes, freeBytes, availableBytes, totalInodes, freeInodes, readOnly }`,
 * the counts as BigInt. Throws with the host's reason otherwise.
 */
export function statvfs(path) {
  try {
    return wit.statvfs(path);
  } catch (e) {
    throw new Error(`statvfs ${path}: ${e?.payload ?? e?.message ?? e}`);
  }
}

/** Problems the host knows of that make the node not ready (strings). */
export function nodeProblems() {
  return wit.nodeProblems();
}

// ---------------------------------------------------------------------------
// Files

const ERRNO = {
  'no-entry': 'no such file or directory',
  access: 'permission denied',
  'not-permitted': 'not permitted (outside the granted directory)',
  'is-directory': 'is a directory',
  'not-directory': 'not a directory',
  loop: 'too many symbolic links',
};

/** An error from reading a file; `code` is the WASI error code (`no-entry`, ...) or `not-granted`. */
export class FileError extends Error {
  constructor(path, code, detail) {
    super(`${path}: ${detail ?? ERRNO[code] ?? code}`);
    this.name = 'FileError';
    this.path = path;
    this.code = code;
  }
}

function normalize(path) {
  if (typeof path !== 'string' || !path.startsWith('/')) {
    throw new FileError(String(path), 'invalid', 'not an absolute path');
  }
  return normalizePath(path);
}

/** Finds the granted directory that holds `path`: `[descriptor, relativePath]`. */
function locate(path) {
  const abs = normalize(path);
  let best;
  const roots = [];
  for (const [desc, root] of getDirectories()) {
    const r = normalize(root);
    roots.push(r);
    const inside = r === '/' || abs === r || abs.startsWith(r + '/');
    if (inside && (!best || r.length > best[1].length)) best = [desc, r];
  }
  if (!best) {
    throw new FileError(
      path,
      'not-granted',
      `not inside a directory granted to this plugin (granted: ${roots.join(', ') || 'none'}); ` +
        `ask for it in metadata.paths, and the operator grants it in plugins.<name>.paths`,
    );
  }
  const rel = abs === best[1] ? '.' : abs.slice(best[1] === '/' ? 1 : best[1].length + 1);
  return [best[0], rel];
}

function wasiCall(path, f) {
  try {
    return f();
  } catch (e) {
    if (e instanceof FileError) throw e;
    const code = typeof e?.payload === 'string' ? e.payload : undefined;
    throw new FileError(path, code ?? 'io', code ? undefined : String(e?.message ?? e));
  }
}

/** The default limit of {@link readFile}, 16 MiB: memory is capped per call (64 MiB by default). */
export const MAX_FILE_BYTES = 16 << 20;

/**
 * Reads a file inside a granted directory as bytes (Uint8Array). Throws a
 * {@link FileError} whose message names the path and the reason.
 */
export function readBytes(path, { maxBytes = MAX_FILE_BYTES } = {}) {
  const [dir, rel] = locate(path);
  const file = wasiCall(path, () => dir.openAt({ symlinkFollow: true }, rel, {}, { read: true }));
  const chunks = [];
  let total = 0;
  // Files in /proc and /sys report size 0: read until the end, not to stat's size.
  for (;;) {
    const [bytes, eof] = wasiCall(path, () => file.read(65536n, BigInt(total)));
    if (bytes.length > 0) {
      chunks.push(bytes);
      total += bytes.length;
      if (total > maxBytes) throw new FileError(path, 'too-large', `larger than ${maxBytes} bytes`);
    }
    if (eof || bytes.length === 0) break;
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** Reads a text file (UTF-8) inside a granted directory. See {@link readBytes}. */
export function readFile(path, options) {
  return new TextDecoder().decode(readBytes(path, options));
}

/**
 * Like {@link readFile}, but `undefined` when the file does not exist (a
 * directory that was not granted is still an error).
 */
export function tryReadFile(path, options) {
  try {
    return readFile(path, options);
  } catch (e) {
    if (e instanceof FileError && e.code === 'no-entry') return undefined;
    throw e;
  }
}

/**
 * Whether `path` exists. A path outside the granted directories is an error,
 * not `false`: a missing grant must not read as a missing file.
 */
export function exists(path) {
  try {
    const [dir, rel] = locate(path);
    wasiCall(path, () => dir.statAt({ symlinkFollow: true }, rel));
    return true;
  } catch (e) {
    if (e instanceof FileError && (e.code === 'no-entry' || e.code === 'not-directory')) return false;
    throw e;
  }
}

/** The names in a directory inside a granted directory, sorted. */
export function readDir(path) {
  const [dir, rel] = locate(path);
  const d =
    rel === '.' ? dir : wasiCall(path, () => dir.openAt({ symlinkFollow: true }, rel, { directory: true }, { read: true }));
  const stream = wasiCall(path, () => d.readDirectory());
  const names = [];
  for (;;) {
    const entry = wasiCall(path, () => stream.readDirectoryEntry());
    if (!entry) break;
    names.push(entry.name);
  }
  return names.sort();
}
