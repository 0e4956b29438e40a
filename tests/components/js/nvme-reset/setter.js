// nvme-reset: an NVMeControllerReset condition and a Warning event when the
// kernel resets an NVMe controller ("nvme nvme0: I/O 123 QID 4 timeout,
// reset controller").

import { ConditionStatus, defineReactor } from '../../../../sdk/js/nodestatus.js';
import { config, recordEvent } from '../../../../sdk/js/host.js';

const CONDITION = 'NVMeControllerReset';

export const { setter, reactor } = defineReactor({
  metadata: { name: 'nvme-reset', version: '0.1.0', description: 'NVMeControllerReset condition from the kernel log' },

  // Each pass: the condition as the node holds it (onLines set it), False
  // until a controller is reset.
  set(node) {
    const c = node.condition(CONDITION);
    if (c) node.setCondition(CONDITION, c.status, c.reason, c.message);
    else node.setCondition(CONDITION, ConditionStatus.False, 'NoReset');
  },

  // Once at load: the kernel log, and the pattern the operator's config may
  // replace ({"pattern": "..."}).
  subscribe() {
    const { pattern } = config({ pattern: 'nvme (nvme\\d+): .*reset' });
    return { streams: [{ name: 'kernel', source: 'kmsg', patterns: [pattern] }] };
  },

  // Within a second of a matching kernel message.
  onLines(node, lines) {
    this.set(node);
    for (const m of lines.matches) {
      node.setCondition(CONDITION, ConditionStatus.True, CONDITION, m.text);
      recordEvent('warning', CONDITION, m.text);
    }
  },
});
