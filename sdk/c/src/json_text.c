/*
 * json_text.c: JSON text in and out: the parser (strict RFC 8259, with
 * line:column errors and a depth limit), the serializer (numbers keep their
 * text, so an untouched node comes back byte for byte), and UTF-8 checks.
 */

#include "internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* A growable byte buffer                                              */
/* ------------------------------------------------------------------ */

typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_reserve(sbuf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) cap *= 2;
    b->p = ns_xrealloc(b->p, cap);
    b->cap = cap;
}

static void sb_put(sbuf *b, const char *s, size_t n) {
    sb_reserve(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_putc(sbuf *b, char c) { sb_put(b, &c, 1); }

/* ------------------------------------------------------------------ */
/* UTF-8                                                               */
/* ------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
#define CONT(i) (n > (i) && (s[i] & 0xC0) == 0x80)
    if (c >= 0xC2 && c <= 0xDF) return CONT(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (!CONT(1) || !CONT(2)) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && s[1] > 0x9F) return 0; /* surrogates */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (!CONT(1) || !CONT(2) || !CONT(3)) return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && s[1] > 0x8F) return 0; /* > U+10FFFF */
        return 4;
    }
#undef CONT
    return 0;
}

static void put_utf8(sbuf *b, uint32_t cp) {
    char o[4];
    size_t n;
    if (cp < 0x80) {
        o[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        o[0] = (char)(0xF0 | (cp >> 18));
        o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    sb_put(b, o, n);
}

char *ns_utf8_sanitize(const char *s, size_t len, size_t *out_len) {
    sbuf b = {0};
    sb_reserve(&b, len);
    size_t i = 0, run = 0;
    while (i < len) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_len((const unsigned char *)s + i, len - i);
        if (k) {
            i += k;
            continue;
        }
        sb_put(&b, s + run, i - run);
        sb_put(&b, "\xEF\xBF\xBD", 3);
        run = ++i;
    }
    sb_put(&b, s + run, len - run);
    if (out_len) *out_len = b.len;
    return b.p;
}

/* ------------------------------------------------------------------ */
/* JSON parser                                                         */
/* ------------------------------------------------------------------ */

#define MAX_DEPTH 128

typedef struct {
    const char *start, *p, *end;
    ns_error *err;
    int depth;
} parser;

static ns_json *fail(parser *ps, const char *what) {
    size_t line = 1, col = 1;
    for (const char *q = ps->start; q < ps->p && q < ps->end; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    ns_error_set(ps->err, "invalid JSON: %s at line %zu column %zu", what, line, col);
    return NULL;
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

/* Skips white space, then consumes `c` if it comes next. */
static bool eat(parser *ps, char c) {
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return true;
    }
    return false;
}

static int hex4(const char *s) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    return v;
}

/* Parses a string at ps->p (on the opening quote) into b. */
static bool parse_string_into(parser *ps, sbuf *b) {
    ps->p++; /* '"' */
    for (;;) {
        /* copy a run of plain bytes */
        const char *run = ps->p;
        while (ps->p < ps->end) {
            unsigned char c = (unsigned char)*ps->p;
            if (c == '"' || c == '\\' || c < 0x20) break;
            if (c < 0x80) {
                ps->p++;
                continue;
            }
            size_t n = utf8_len((const unsigned char *)ps->p, (size_t)(ps->end - ps->p));
            if (!n) {
                sb_put(b, run, (size_t)(ps->p - run));
                fail(ps, "invalid UTF-8 in string");
                return false;
            }
            ps->p += n;
        }
        sb_put(b, run, (size_t)(ps->p - run));
        if (ps->p >= ps->end) {
            fail(ps, "unterminated string");
            return false;
        }
        char c = *ps->p;
        if (c == '"') {
            ps->p++;
            return true;
        }
        if (c != '\\') {
            fail(ps, "control character in string");
            return false;
        }
        if (ps->p + 1 >= ps->end) {
            ps->p++;
            fail(ps, "unterminated string");
            return false;
        }
        char e = ps->p[1];
        ps->p += 2;
        switch (e) {
        case '"': sb_putc(b, '"'); break;
        case '\\': sb_putc(b, '\\'); break;
        case '/': sb_putc(b, '/'); break;
        case 'b': sb_putc(b, '\b'); break;
        case 'f': sb_putc(b, '\f'); break;
        case 'n': sb_putc(b, '\n'); break;
        case 'r': sb_putc(b, '\r'); break;
        case 't': sb_putc(b, '\t'); break;
        case 'u': {
            int hi = ps->end - ps->p >= 4 ? hex4(ps->p) : -1;
            if (hi < 0) {
                fail(ps, "invalid \\u escape");
                return false;
            }
            ps->p += 4;
            uint32_t cp = (uint32_t)hi;
            if (hi >= 0xD800 && hi <= 0xDBFF) {
                int lo = ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u' ? hex4(ps->p + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    fail(ps, "lone leading surrogate in \\u escape");
                    return false;
                }
                ps->p += 6;
                cp = 0x10000 + (((uint32_t)hi - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            } else if (hi >= 0xDC00 && hi <= 0xDFFF) {
                fail(ps, "lone trailing surrogate in \\u escape");
                return false;
            }
            put_utf8(b, cp);
            break;
        }
        default:
            ps->p--;
            fail(ps, "invalid escape");
            return false;
        }
    }
}

/* Parses a string at ps->p (on the opening quote) into a malloc'd buffer.
 * Strings without escapes, the usual case, are copied in one go. */
static bool parse_string(parser *ps, char **out, size_t *out_len) {
    const char *start = ps->p + 1, *q = start;
    while (q < ps->end) {
        unsigned char c = (unsigned char)*q;
        if (c == '"') {
            *out = ns__memdup(start, (size_t)(q - start));
            *out_len = (size_t)(q - start);
            ps->p = q + 1;
            return true;
        }
        if (c == '\\' || c < 0x20) break;
        if (c < 0x80) {
            q++;
            continue;
        }
        size_t n = utf8_len((const unsigned char *)q, (size_t)(ps->end - q));
        if (!n) break;
        q += n;
    }
    sbuf b = {0}; /* escapes, or an error to report: the careful path */
    if (!parse_string_into(ps, &b)) {
        free(b.p);
        return false;
    }
    *out = b.p ? b.p : ns__memdup("", 0);
    *out_len = b.len;
    return true;
}

static ns_json *parse_value(parser *ps);

static bool literal(parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, word, n) == 0) {
        ps->p += n;
        return true;
    }
    return false;
}

static ns_json *parse_array(parser *ps) {
    ps->p++; /* '[' */
    ns_json *arr = ns_json_array();
    if (eat(ps, ']')) return arr;
    for (;;) {
        ns_json *item = parse_value(ps);
        if (!item) goto bad;
        ns_json_push(arr, item);
        if (eat(ps, ',')) continue;
        if (eat(ps, ']')) return arr;
        fail(ps, "expected ',' or ']'");
        goto bad;
    }
bad:
    ns_json_free(arr);
    return NULL;
}

static ns_json *parse_object(parser *ps) {
    ps->p++; /* '{' */
    ns_json *obj = ns_json_object();
    char *key = NULL;
    size_t klen = 0;
    if (eat(ps, '}')) return obj;
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"') {
            fail(ps, "expected a string key");
            goto bad;
        }
        if (!parse_string(ps, &key, &klen)) goto bad;
        if (!eat(ps, ':')) {
            fail(ps, "expected ':'");
            goto bad;
        }
        ns_json *val = parse_value(ps);
        if (!val) goto bad;
        ns__json_set_member(obj, key, klen, val, true);
        key = NULL;
        if (eat(ps, ',')) continue;
        if (eat(ps, '}')) return obj;
        fail(ps, "expected ',' or '}'");
        goto bad;
    }
bad:
    free(key);
    ns_json_free(obj);
    return NULL;
}

static ns_json *parse_value(parser *ps) {
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "unexpected end of input");
    char c = *ps->p;
    switch (c) {
    case '{':
    case '[': {
        if (++ps->depth > MAX_DEPTH) return fail(ps, "nesting too deep");
        ns_json *v = c == '{' ? parse_object(ps) : parse_array(ps);
        ps->depth--;
        return v;
    }
    case '"': {
        char *str;
        size_t n;
        if (!parse_string(ps, &str, &n)) return NULL;
        ns_json *v = ns__json_new(NS_JSON_STRING);
        v->s = str;
        v->slen = n;
        return v;
    }
    case 't':
        if (literal(ps, "true")) return ns_json_bool(true);
        break;
    case 'f':
        if (literal(ps, "false")) return ns_json_bool(false);
        break;
    case 'n':
        if (literal(ps, "null")) return ns_json_null();
        break;
    default: {
        size_t n = ns__json_scan_number(ps->p, (size_t)(ps->end - ps->p));
        if (n) {
            ns_json *v = ns__json_number_owned(ns__memdup(ps->p, n), n);
            ps->p += n;
            return v;
        }
    }
    }
    return fail(ps, "expected a value");
}

ns_json *ns_json_parse(const char *text, size_t len, ns_error *err) {
    parser ps = {text, text, text + len, err, 0};
    ns_json *v = parse_value(&ps);
    if (!v) return NULL;
    skip_ws(&ps);
    if (ps.p != ps.end) {
        ns_json_free(v);
        return fail(&ps, "trailing characters");
    }
    return v;
}

/* ------------------------------------------------------------------ */
/* JSON serializer                                                     */
/* ------------------------------------------------------------------ */

static void write_string(sbuf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    sb_reserve(b, n + 2);
    sb_putc(b, '"');
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0x80) {
            size_t k = utf8_len((const unsigned char *)s + i, n - i);
            if (k) {
                i += k;
                continue;
            }
        }
        sb_put(b, s + run, i - run);
        switch (c) {
        case '"': sb_put(b, "\\\"", 2); break;
        case '\\': sb_put(b, "\\\\", 2); break;
        case '\b': sb_put(b, "\\b", 2); break;
        case '\f': sb_put(b, "\\f", 2); break;
        case '\n': sb_put(b, "\\n", 2); break;
        case '\r': sb_put(b, "\\r", 2); break;
        case '\t': sb_put(b, "\\t", 2); break;
        default:
            if (c < 0x20) {
                char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                sb_put(b, u, 6);
            } else {
                sb_put(b, "\xEF\xBF\xBD", 3); /* invalid UTF-8: U+FFFD */
            }
        }
        run = ++i;
    }
    sb_put(b, s + run, n - run);
    sb_putc(b, '"');
}

static void write_value(sbuf *b, const ns_json *v) {
    if (!v) {
        sb_put(b, "null", 4);
        return;
    }
    switch (v->type) {
    case NS_JSON_NULL: sb_put(b, "null", 4); break;
    case NS_JSON_BOOL: v->b ? sb_put(b, "true", 4) : sb_put(b, "false", 5); break;
    case NS_JSON_NUMBER: sb_put(b, v->s, v->slen); break;
    case NS_JSON_STRING: write_string(b, v->s, v->slen); break;
    case NS_JSON_ARRAY:
        sb_putc(b, '[');
        for (size_t i = 0; i < v->len; i++) {
            if (i) sb_putc(b, ',');
            write_value(b, v->items[i]);
        }
        sb_putc(b, ']');
        break;
    case NS_JSON_OBJECT:
        sb_putc(b, '{');
        for (size_t i = 0; i < v->len; i++) {
            if (i) sb_putc(b, ',');
            write_string(b, v->members[i].key, v->members[i].klen);
            sb_putc(b, ':');
            write_value(b, v->members[i].val);
        }
        sb_putc(b, '}');
        break;
    }
}

char *ns_json_serialize(const ns_json *v, size_t *len) {
    sbuf b = {0};
    sb_reserve(&b, 64);
    write_value(&b, v);
    if (len) *len = b.len;
    return b.p;
}
