// Node conditions: the three statuses.

/** A condition's status: `True`, `False` or `Unknown`. */
export const ConditionStatus = Object.freeze({
  True: 'True',
  False: 'False',
  Unknown: 'Unknown',
  /** `True` when `b`, else `False`. */
  fromBool(b) {
    return b ? 'True' : 'False';
  },
  /** Whether `s` is one of the three statuses. */
  isValid(s) {
    return s === 'True' || s === 'False' || s === 'Unknown';
  },
});

/** A status from a ConditionStatus string or a boolean; throws on anything else. */
export function conditionStatus(s) {
  if (typeof s === 'boolean') return ConditionStatus.fromBool(s);
  if (!ConditionStatus.isValid(s)) {
    throw new TypeError(`${JSON.stringify(s)} is not True, False or Unknown`);
  }
  return s;
}
