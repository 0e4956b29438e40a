/*
 * quantity.c: Kubernetes resource quantities (ns_quantity): parsing and the
 * canonical form the API server writes.
 */

#include "../nodestatus.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int exp;
} BINARY[] = {{"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}, {"Pi", 50}, {"Ei", 60}},
  DECIMAL[] = {{"n", -9}, {"u", -6}, {"m", -3}, {"k", 3}, {"M", 6},
               {"G", 9},  {"T", 12}, {"P", 15}, {"E", 18}};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

ns_quantity ns_quantity_units(int64_t n) { return (ns_quantity){n, 0, NS_DECIMAL_SI}; }

ns_quantity ns_quantity_from_millis(int64_t m) {
    int64_t u = m / 1000, r = m % 1000;
    if (r < 0) {
        r += 1000;
        u -= 1;
    }
    return (ns_quantity){u, (int32_t)r, NS_DECIMAL_SI};
}

ns_quantity ns_quantity_bytes(uint64_t b) {
    return (ns_quantity){b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)b, 0, NS_BINARY_SI};
}

static bool is_digits(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

bool ns_quantity_parse(const char *s, ns_quantity *out, ns_error *err) {
    size_t n = strlen(s);
    const char *t = s;
    while (n && (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r')) t++, n--;
    while (n && (t[n - 1] == ' ' || t[n - 1] == '\t' || t[n - 1] == '\n' || t[n - 1] == '\r')) n--;
#define BAD() (ns_error_set(err, "\"%s\" is not a quantity (for example 2, 500m, 16Gi, 1.5G)", s), false)
    if (n == 0 || n > 64) return BAD();
    size_t ne = 0;
    while (ne < n && ((t[ne] >= '0' && t[ne] <= '9') || t[ne] == '.' || t[ne] == '+' || t[ne] == '-')) ne++;
    const char *num = t, *suffix = t + ne;
    size_t sn = n - ne;
    bool neg = false;
    if (ne && (num[0] == '-' || num[0] == '+')) {
        neg = num[0] == '-';
        num++;
        ne--;
    }
    const char *dot = memchr(num, '.', ne);
    size_t ilen = dot ? (size_t)(dot - num) : ne;
    const char *frac = dot ? dot + 1 : num + ne;
    size_t flen = dot ? ne - ilen - 1 : 0;
    if ((ilen == 0 && flen == 0) || !is_digits(num, ilen) || !is_digits(frac, flen)) return BAD();

    int dec_exp = 0, bin_exp = 0;
    ns_quantity_format format = NS_DECIMAL_SI;
    bool found = sn == 0;
    for (size_t i = 0; !found && i < COUNT(BINARY); i++)
        if (strlen(BINARY[i].name) == sn && memcmp(BINARY[i].name, suffix, sn) == 0) {
            bin_exp = BINARY[i].exp;
            format = NS_BINARY_SI;
            found = true;
        }
    for (size_t i = 0; !found && i < COUNT(DECIMAL); i++)
        if (strlen(DECIMAL[i].name) == sn && memcmp(DECIMAL[i].name, suffix, sn) == 0) {
            dec_exp = DECIMAL[i].exp;
            found = true;
        }
    if (!found && (suffix[0] == 'e' || suffix[0] == 'E')) {
        size_t i = 1;
        bool eneg = false;
        if (i < sn && (suffix[i] == '+' || suffix[i] == '-')) eneg = suffix[i++] == '-';
        if (i == sn || !is_digits(suffix + i, sn - i) || sn - i > 4) return BAD();
        int e = 0;
        for (; i < sn; i++) e = e * 10 + (suffix[i] - '0');
        dec_exp = eneg ? -e : e;
        found = true;
    }
    if (!found) return BAD();

    /* The digits D = int frac without leading zeros; millis = D * 10^k. */
    char digits[80];
    size_t dn = 0;
    for (size_t i = 0; i < ilen; i++)
        if (dn || num[i] != '0') digits[dn++] = num[i];
    for (size_t i = 0; i < flen; i++)
        if (dn || frac[i] != '0') digits[dn++] = frac[i];
    long k = (long)dec_exp + 3 - (long)flen;
    bool round_up = false;
    if (k < 0) {
        size_t drop = (size_t)-k;
        if (drop > dn) drop = dn;
        for (size_t i = dn - drop; i < dn; i++) round_up |= digits[i] != '0';
        dn -= drop;
        k = 0;
    }
    /* Millis as a digit string M = D followed by k zeros: the units are all
     * but its last 3 digits, the remainder those 3. */
    uint64_t units = 0;
    unsigned rem = 0;
    if (dn) {
        if ((long)dn + k - 3 > 20) {
            ns_error_set(err, "\"%s\" is out of range", s);
            return false;
        }
        long L = (long)dn + k;
        for (long i = 0; i < L; i++) {
            unsigned d = i < (long)dn ? (unsigned)(digits[i] - '0') : 0;
            if (i < L - 3) {
                if (units > (UINT64_MAX - d) / 10) {
                    ns_error_set(err, "\"%s\" is out of range", s);
                    return false;
                }
                units = units * 10 + d;
            } else {
                rem = rem * 10 + d;
            }
        }
    }
    if (round_up && ++rem == 1000) {
        rem = 0;
        units++;
    }
    for (int i = 0; i < bin_exp; i++) {
        if (units > (UINT64_MAX - 1) / 2) {
            ns_error_set(err, "\"%s\" is out of range", s);
            return false;
        }
        rem *= 2;
        units = units * 2 + rem / 1000;
        rem %= 1000;
    }
    ns_quantity q = {0, 0, format};
    if (!neg) {
        if (units > (uint64_t)INT64_MAX) {
            ns_error_set(err, "\"%s\" is out of range", s);
            return false;
        }
        q.units = (int64_t)units;
        q.millis = (int32_t)rem;
    } else if (rem == 0) {
        if (units > (uint64_t)INT64_MAX + 1) {
            ns_error_set(err, "\"%s\" is out of range", s);
            return false;
        }
        q.units = units == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)units;
    } else {
        if (units > (uint64_t)INT64_MAX) {
            ns_error_set(err, "\"%s\" is out of range", s);
            return false;
        }
        q.units = -(int64_t)units - 1;
        q.millis = (int32_t)(1000 - rem);
    }
#undef BAD
    *out = q;
    return true;
}

char *ns_quantity_format_to(ns_quantity q, char buf[NS_QUANTITY_MAX]) {
    if (q.millis != 0) {
        bool neg = q.units < 0;
        uint64_t mu = neg ? (uint64_t)(-(q.units + 1)) : (uint64_t)q.units;
        unsigned mm = neg ? 1000u - (unsigned)q.millis : (unsigned)q.millis;
        if (mu == 0)
            snprintf(buf, NS_QUANTITY_MAX, "%s%um", neg ? "-" : "", mm);
        else
            snprintf(buf, NS_QUANTITY_MAX, "%s%llu%03um", neg ? "-" : "", (unsigned long long)mu, mm);
        return buf;
    }
    int64_t u = q.units;
    if (u == 0) {
        snprintf(buf, NS_QUANTITY_MAX, "0");
        return buf;
    }
    /* As Kubernetes does, a binary quantity under 1Ki is written in decimal
     * (1000 bytes is "1k"). */
    if (q.format == NS_BINARY_SI && (u >= 1024 || u <= -1024)) {
        for (size_t i = COUNT(BINARY); i-- > 0;) {
            int64_t d = (int64_t)1 << BINARY[i].exp;
            if (u % d == 0) {
                snprintf(buf, NS_QUANTITY_MAX, "%lld%s", (long long)(u / d), BINARY[i].name);
                return buf;
            }
        }
    } else {
        for (size_t i = COUNT(DECIMAL); i-- > 0;) {
            if (DECIMAL[i].exp <= 0) break;
            int64_t d = 1;
            for (int e = 0; e < DECIMAL[i].exp; e++) d *= 10;
            if (u % d == 0) {
                snprintf(buf, NS_QUANTITY_MAX, "%lld%s", (long long)(u / d), DECIMAL[i].name);
                return buf;
            }
        }
    }
    snprintf(buf, NS_QUANTITY_MAX, "%lld", (long long)u);
    return buf;
}

int ns_quantity_cmp(ns_quantity a, ns_quantity b) {
    if (a.units != b.units) return a.units < b.units ? -1 : 1;
    if (a.millis != b.millis) return a.millis < b.millis ? -1 : 1;
    return 0;
}

static int64_t sat_add(int64_t a, int64_t b) {
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

ns_quantity ns_quantity_add(ns_quantity a, ns_quantity b) {
    int32_t m = a.millis + b.millis;
    int64_t u = sat_add(sat_add(a.units, b.units), m / 1000);
    return (ns_quantity){u, m % 1000, a.format};
}

ns_quantity ns_quantity_sub_floor0(ns_quantity a, ns_quantity b) {
    ns_quantity nb = b.millis ? (ns_quantity){-sat_add(b.units, 1), 1000 - b.millis, b.format}
                              : (ns_quantity){b.units == INT64_MIN ? INT64_MAX : -b.units, 0, b.format};
    ns_quantity r = ns_quantity_add(a, nb);
    if (r.units < 0) r.units = 0, r.millis = 0;
    return r;
}

int64_t ns_quantity_units_ceil(ns_quantity q) { return q.millis ? sat_add(q.units, 1) : q.units; }

int64_t ns_quantity_as_millis(ns_quantity q) {
    if (q.units > (INT64_MAX - 999) / 1000) return INT64_MAX;
    if (q.units < INT64_MIN / 1000) return INT64_MIN;
    return q.units * 1000 + q.millis;
}
