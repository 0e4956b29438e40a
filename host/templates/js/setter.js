// {{name}}: a nodestatus setter. It labels the node with its kernel's
// major.minor version; change `set` to report what you need.
//
// Build, test and check it with `./build.sh`.

import { defineSetter } from '{{repo}}/sdk/js/nodestatus.js';
import { system } from '{{repo}}/sdk/js/host.js';

export const LABEL = '{{name}}.nodestatus.io/kernel';

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
  },

  set(node) {
    const release = system().kernelRelease;
    const version = majorMinor(release);
    if (version === undefined) throw new Error(`cannot read a version from the kernel release ${JSON.stringify(release)}`);
    node.setLabel(LABEL, version);
  },
});
