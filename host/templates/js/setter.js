// {{name}}: a nodestatus setter. It labels the node with its kernel's
// major.minor version, read from a file; change `set` to report what you need.
//
// A setter reads only the directories it asks for in its metadata and the
// operator grants (config.yaml holds the grant). Build, test and check it
// with `./build.sh`.

import { defineSetter } from './{{kit}}/sdk/js/nodestatus.js';
import { readFile } from './{{kit}}/sdk/js/host.js';

export const LABEL = '{{name}}.nodestatus.io/kernel';

/** The file it reads, in the directory it asks for. */
export const RELEASE_FILE = '{{grant}}/osrelease';

/** The kernel's `major.minor`, from a release such as `6.1.0-18-amd64`. */
export function majorMinor(release) {
  const m = /^(\d+)\.(\d+)/.exec(release);
  return m ? `${m[1]}.${m[2]}` : undefined;
}

export const setter = defineSetter({
  metadata: {
    name: '{{name}}',
    version: '0.1.0',
    description: "labels the node with its kernel's major.minor version",
    // The directory of RELEASE_FILE; config.yaml grants it.
    paths: ['{{grant}}'],
  },

  set(node) {
    const release = readFile(RELEASE_FILE).trim();
    const version = majorMinor(release);
    if (version === undefined) throw new Error(`cannot read a version from the kernel release ${JSON.stringify(release)}`);
    node.setLabel(LABEL, version);
  },
});
