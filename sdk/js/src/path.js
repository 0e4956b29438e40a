// Absolute paths, resolved lexically: what `.`, `..` and repeated `/` mean
// without asking a filesystem. ../host.js and ../testing.js's fake host use it.

/** `path` with `.`, `..` and repeated `/` resolved, as an absolute path: `/a/./b/../c` is `/a/c`, `/..` is `/`. */
export function normalizePath(path) {
  const out = [];
  for (const seg of path.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') out.pop();
    else out.push(seg);
  }
  return '/' + out.join('/');
}
