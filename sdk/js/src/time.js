// RFC 3339 timestamps: a condition's times (`metav1.Time`).

function pad(n, w = 2) {
  return String(n).padStart(w, '0');
}

/** `2026-01-02T03:04:05Z`: a `metav1.Time`, the form of a condition's times. */
export function rfc3339(date) {
  const d = date instanceof Date ? date : new Date(date);
  return (
    `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}` +
    `T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}Z`
  );
}

/** The current time as {@link rfc3339} writes it. */
export function now() {
  return rfc3339(new Date());
}
