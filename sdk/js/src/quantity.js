// Kubernetes resource quantities, exact to the milli-unit.

const BINARY = [
  ['Ki', 10n],
  ['Mi', 20n],
  ['Gi', 30n],
  ['Ti', 40n],
  ['Pi', 50n],
  ['Ei', 60n],
];
const DECIMAL = [
  ['n', -9],
  ['u', -6],
  ['m', -3],
  ['k', 3],
  ['M', 6],
  ['G', 9],
  ['T', 12],
  ['P', 15],
  ['E', 18],
];

function toBigInt(n, what) {
  if (typeof n === 'bigint') return n;
  if (typeof n === 'number' && Number.isInteger(n)) return BigInt(n);
  throw new TypeError(`${what} must be an integer (number or bigint), got ${String(n)}`);
}

/**
 * A Kubernetes resource quantity (`2`, `1500m`, `16Gi`, `100M`), held exactly
 * in thousandths of a unit (as a BigInt), written in the canonical form the
 * API server uses.
 */
export class Quantity {
  /** @param {bigint} millis @param {'BinarySI'|'DecimalSI'} format */
  constructor(millis, format = 'DecimalSI') {
    if (format !== 'BinarySI' && format !== 'DecimalSI') {
      throw new TypeError(`format must be BinarySI or DecimalSI, got ${String(format)}`);
    }
    this.millisValue = toBigInt(millis, 'millis');
    this.format = format;
    Object.freeze(this);
  }

  /** Whole units, written in decimal (`cpu`, `pods`). */
  static units(n) {
    return new Quantity(toBigInt(n, 'units') * 1000n, 'DecimalSI');
  }

  /** Thousandths of a unit (`1500m` CPU). */
  static millis(m) {
    return new Quantity(toBigInt(m, 'millis'), 'DecimalSI');
  }

  /** A byte count, written in binary units (`memory`). */
  static bytes(b) {
    const v = toBigInt(b, 'bytes');
    if (v < 0n) throw new RangeError(`bytes must not be negative, got ${v}`);
    return new Quantity(v * 1000n, 'BinarySI');
  }

  /**
   * Parses the API server's quantity syntax. Sub-milli fractions round up, as
   * the API server does. Throws an Error that shows an example on bad input.
   */
  static parse(s) {
    const err = () =>
      new Error(`${JSON.stringify(String(s))} is not a quantity (for example 2, 500m, 16Gi, 1.5G)`);
    if (typeof s !== 'string') throw err();
    // ASCII whitespace only, as the other SDKs trim it (Kubernetes itself refuses any).
    const t = s.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, '');
    if (t.length === 0 || t.length > 64) throw err();
    const m = /^([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)$/.exec(t);
    if (!m) throw err();
    const [, sign, int, fracRaw, suffix] = m;
    const frac = fracRaw ?? '';
    if (int === '' && frac === '') throw err();
    let decExp = 0;
    let binExp = 0n;
    let format = 'DecimalSI';
    const bin = BINARY.find(([n]) => n === suffix);
    const dec = DECIMAL.find(([n]) => n === suffix);
    if (suffix === '') {
      // plain number
    } else if (bin) {
      binExp = bin[1];
      format = 'BinarySI';
    } else if (dec) {
      decExp = dec[1];
    } else if (/^[eE][+-]?[0-9]+$/.test(suffix)) {
      decExp = Number.parseInt(suffix.slice(1), 10);
    } else {
      throw err();
    }
    const mantissa = BigInt((int + frac).replace(/^0+/, '') || '0');
    // millis = mantissa * 10^(decExp + 3 - frac.length) * 2^binExp
    const exp10 = decExp + 3 - frac.length;
    if (Math.abs(exp10) > 60) throw err();
    let scaled;
    if (exp10 >= 0) {
      scaled = mantissa * 10n ** BigInt(exp10);
    } else {
      const p = 10n ** BigInt(-exp10);
      scaled = (mantissa + p - 1n) / p; // round up, as resource.Quantity does
    }
    scaled *= 1n << binExp;
    if (scaled >= 1n << 126n) throw err(); // the Rust SDK's i128 range
    return new Quantity(sign === '-' ? -scaled : scaled, format);
  }

  /** The value in thousandths of a unit, as a BigInt. */
  asMillis() {
    return this.millisValue;
  }

  /** The value in whole units, rounded up, as a BigInt. */
  asUnitsCeil() {
    const m = this.millisValue;
    const q = m / 1000n;
    const r = m % 1000n;
    // BigInt division truncates toward zero; ceil differs only for a positive remainder.
    return r > 0n ? q + 1n : q;
  }

  /** The value as a Number in units (may lose precision above 2^53 milli-units). */
  toNumber() {
    return Number(this.millisValue) / 1000;
  }

  /** `this - other`, never below zero (the kubelet's allocatable rule). */
  saturatingSub(other) {
    const d = this.millisValue - other.millisValue;
    return new Quantity(d > 0n ? d : 0n, this.format);
  }

  /** `this + other`. */
  add(other) {
    return new Quantity(this.millisValue + other.millisValue, this.format);
  }

  /** Whether both hold the same value in the same format. */
  equals(other) {
    return (
      other instanceof Quantity &&
      other.millisValue === this.millisValue &&
      other.format === this.format
    );
  }

  /** -1, 0 or 1, by value. */
  compare(other) {
    const a = this.millisValue;
    const b = other.millisValue;
    return a < b ? -1 : a > b ? 1 : 0;
  }

  /**
   * The canonical form: the largest suffix that writes the value as a whole
   * number. As Kubernetes does, a binary quantity under 1Ki is written in
   * decimal (1000 bytes is `1k`).
   */
  toString() {
    const m = this.millisValue;
    if (m % 1000n !== 0n) return `${m}m`;
    const units = m / 1000n;
    if (units === 0n) return '0';
    if (this.format === 'BinarySI' && (units >= 1024n || units <= -1024n)) {
      for (const [name, exp] of [...BINARY].reverse()) {
        const d = 1n << exp;
        if (units % d === 0n) return `${units / d}${name}`;
      }
      return `${units}`;
    }
    for (const [name, exp] of [...DECIMAL].reverse()) {
      if (exp <= 0) continue;
      const d = 10n ** BigInt(exp);
      if (units % d === 0n) return `${units / d}${name}`;
    }
    return `${units}`;
  }

  toJSON() {
    return this.toString();
  }
}

/** The canonical text of a Quantity, a quantity string or a whole number of units. */
export function quantityString(q) {
  if (q instanceof Quantity) return q.toString();
  if (typeof q === 'string') return Quantity.parse(q).toString();
  if (typeof q === 'number' || typeof q === 'bigint') return Quantity.units(q).toString();
  throw new TypeError(`expected a Quantity, a quantity string or an integer, got ${String(q)}`);
}
