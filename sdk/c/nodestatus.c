/*
 * nodestatus.c: JSON, Node, Quantity, conditions and time for C setters.
 * Plain C11 and libc; compiles natively (for tests) and for wasm32-wasi.
 * See nodestatus.h for the API.
 */
#include "nodestatus.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ */
/* Memory and errors                                                   */
/* ------------------------------------------------------------------ */

static void oom(void) {
    fputs("nodestatus: out of memory\n", stderr);
    abort();
}

void *ns_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) oom();
    return p;
}

void *ns_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) oom();
    return q;
}

static char *xmemdup(const char *s, size_t len) {
    char *p = ns_xmalloc(len + 1);
    if (len) memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *ns_xstrdup(const char *s) { return xmemdup(s, strlen(s)); }

static char *vformat(const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return ns_xstrdup(fmt);
    char *s = ns_xmalloc((size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

int ns_error_set(ns_error *err, const char *fmt, ...) {
    if (!err) return -1;
    va_list ap;
    va_start(ap, fmt);
    char *m = vformat(fmt, ap);
    va_end(ap);
    free(err->message);
    err->message = m;
    return -1;
}

void ns_error_clear(ns_error *err) {
    if (!err) return;
    free(err->message);
    err->message = NULL;
}

char *ns_read_file(const char *path, size_t max, size_t *len) {
    if (max == 0) max = 16u << 20;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = ns_xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > max) break;
            cap *= 2;
            buf = ns_xrealloc(buf, cap);
        }
        size_t want = cap - n - 1;
        if (n + want > max) want = max - n;
        if (want == 0) break;
        size_t got = fread(buf + n, 1, want, f);
        n += got;
        if (got < want) {
            if (ferror(f)) {
                int e = errno ? errno : EIO;
                fclose(f);
                free(buf);
                errno = e;
                return NULL;
            }
            break;
        }
    }
    fclose(f);
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

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
/* JSON values                                                         */
/* ------------------------------------------------------------------ */

typedef struct {
    char *key;
    size_t klen;
    ns_json *val;
} member;

struct ns_json {
    ns_json_type type;
    bool b;
    char *s; /* string bytes, or a number's text; NUL-terminated */
    size_t slen;
    ns_json **items; /* array */
    member *members; /* object */
    size_t len, cap;
};

static ns_json *jnew(ns_json_type t) {
    ns_json *v = ns_xmalloc(sizeof *v);
    memset(v, 0, sizeof *v);
    v->type = t;
    return v;
}

ns_json *ns_json_null(void) { return jnew(NS_JSON_NULL); }

ns_json *ns_json_bool(bool b) {
    ns_json *v = jnew(NS_JSON_BOOL);
    v->b = b;
    return v;
}

ns_json *ns_json_string_len(const char *s, size_t len) {
    ns_json *v = jnew(NS_JSON_STRING);
    v->s = xmemdup(s, len);
    v->slen = len;
    return v;
}

ns_json *ns_json_string(const char *s) { return ns_json_string_len(s, strlen(s)); }

static ns_json *number_owned(char *text, size_t len) {
    ns_json *v = jnew(NS_JSON_NUMBER);
    v->s = text;
    v->slen = len;
    return v;
}

ns_json *ns_json_int(int64_t n) {
    char buf[32];
    int k = snprintf(buf, sizeof buf, "%lld", (long long)n);
    return number_owned(xmemdup(buf, (size_t)k), (size_t)k);
}

ns_json *ns_json_uint(uint64_t n) {
    char buf[32];
    int k = snprintf(buf, sizeof buf, "%llu", (unsigned long long)n);
    return number_owned(xmemdup(buf, (size_t)k), (size_t)k);
}

/* Length of the JSON number at s (within n bytes), 0 if none. */
static size_t scan_number(const char *s, size_t n) {
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    if (i >= n) return 0;
    if (s[i] == '0') {
        i++;
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    } else {
        return 0;
    }
    if (i < n && s[i] == '.') {
        size_t j = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == j) return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t j = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == j) return 0;
    }
    return i;
}

ns_json *ns_json_number_text(const char *text) {
    size_t n = strlen(text);
    if (n == 0 || scan_number(text, n) != n) return NULL;
    return number_owned(xmemdup(text, n), n);
}

ns_json *ns_json_array(void) { return jnew(NS_JSON_ARRAY); }
ns_json *ns_json_object(void) { return jnew(NS_JSON_OBJECT); }

void ns_json_free(ns_json *v) {
    if (!v) return;
    free(v->s);
    if (v->type == NS_JSON_ARRAY) {
        for (size_t i = 0; i < v->len; i++) ns_json_free(v->items[i]);
        free(v->items);
    } else if (v->type == NS_JSON_OBJECT) {
        for (size_t i = 0; i < v->len; i++) {
            free(v->members[i].key);
            ns_json_free(v->members[i].val);
        }
        free(v->members);
    }
    free(v);
}

ns_json *ns_json_clone(const ns_json *v) {
    if (!v) return NULL;
    ns_json *c = jnew(v->type);
    c->b = v->b;
    if (v->s) {
        c->s = xmemdup(v->s, v->slen);
        c->slen = v->slen;
    }
    if (v->type == NS_JSON_ARRAY) {
        for (size_t i = 0; i < v->len; i++) ns_json_push(c, ns_json_clone(v->items[i]));
    } else if (v->type == NS_JSON_OBJECT) {
        c->members = ns_xmalloc(sizeof(member) * (v->len ? v->len : 1));
        c->cap = v->len;
        for (size_t i = 0; i < v->len; i++) {
            c->members[i].key = xmemdup(v->members[i].key, v->members[i].klen);
            c->members[i].klen = v->members[i].klen;
            c->members[i].val = ns_json_clone(v->members[i].val);
        }
        c->len = v->len;
    }
    return c;
}

bool ns_json_equal(const ns_json *a, const ns_json *b) {
    if (!a || !b) return a == b;
    if (a->type != b->type) return false;
    switch (a->type) {
    case NS_JSON_NULL:
        return true;
    case NS_JSON_BOOL:
        return a->b == b->b;
    case NS_JSON_NUMBER:
    case NS_JSON_STRING:
        return a->slen == b->slen && memcmp(a->s, b->s, a->slen) == 0;
    case NS_JSON_ARRAY:
        if (a->len != b->len) return false;
        for (size_t i = 0; i < a->len; i++)
            if (!ns_json_equal(a->items[i], b->items[i])) return false;
        return true;
    case NS_JSON_OBJECT:
        if (a->len != b->len) return false;
        for (size_t i = 0; i < a->len; i++) {
            const member *m = &a->members[i];
            const ns_json *o = NULL;
            for (size_t j = 0; j < b->len; j++) {
                if (b->members[j].klen == m->klen && memcmp(b->members[j].key, m->key, m->klen) == 0) {
                    o = b->members[j].val;
                    break;
                }
            }
            if (!o || !ns_json_equal(m->val, o)) return false;
        }
        return true;
    }
    return false;
}

ns_json_type ns_json_typeof(const ns_json *v) { return v ? v->type : NS_JSON_NULL; }
bool ns_json_is_true(const ns_json *v) { return v && v->type == NS_JSON_BOOL && v->b; }
const char *ns_json_str(const ns_json *v) { return v && v->type == NS_JSON_STRING ? v->s : NULL; }
size_t ns_json_str_len(const ns_json *v) { return v && v->type == NS_JSON_STRING ? v->slen : 0; }
const char *ns_json_num_text(const ns_json *v) { return v && v->type == NS_JSON_NUMBER ? v->s : NULL; }

bool ns_json_uint64(const ns_json *v, uint64_t *out) {
    if (!v || v->type != NS_JSON_NUMBER || v->s[0] == '-') return false;
    uint64_t n = 0;
    for (size_t i = 0; i < v->slen; i++) {
        char c = v->s[i];
        if (c < '0' || c > '9') return false;
        unsigned d = (unsigned)(c - '0');
        if (n > (UINT64_MAX - d) / 10) return false;
        n = n * 10 + d;
    }
    *out = n;
    return true;
}

bool ns_json_int64(const ns_json *v, int64_t *out) {
    if (!v || v->type != NS_JSON_NUMBER) return false;
    bool neg = v->s[0] == '-';
    uint64_t n = 0;
    for (size_t i = neg ? 1 : 0; i < v->slen; i++) {
        char c = v->s[i];
        if (c < '0' || c > '9') return false;
        unsigned d = (unsigned)(c - '0');
        if (n > (UINT64_MAX - d) / 10) return false;
        n = n * 10 + d;
    }
    if (neg) {
        if (n > (uint64_t)INT64_MAX + 1) return false;
        *out = n == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)n;
    } else {
        if (n > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)n;
    }
    return true;
}

bool ns_json_double(const ns_json *v, double *out) {
    if (!v || v->type != NS_JSON_NUMBER) return false;
    *out = strtod(v->s, NULL);
    return true;
}

size_t ns_json_len(const ns_json *v) {
    return v && (v->type == NS_JSON_ARRAY || v->type == NS_JSON_OBJECT) ? v->len : 0;
}

ns_json *ns_json_at(const ns_json *arr, size_t i) {
    return arr && arr->type == NS_JSON_ARRAY && i < arr->len ? arr->items[i] : NULL;
}

ns_json *ns_json_push(ns_json *arr, ns_json *item) {
    if (!arr || arr->type != NS_JSON_ARRAY) {
        ns_json_free(item);
        return NULL;
    }
    if (arr->len == arr->cap) {
        arr->cap = arr->cap ? arr->cap * 2 : 4;
        arr->items = ns_xrealloc(arr->items, sizeof(ns_json *) * arr->cap);
    }
    arr->items[arr->len++] = item;
    return item;
}

bool ns_json_remove_at(ns_json *arr, size_t i) {
    if (!arr || arr->type != NS_JSON_ARRAY || i >= arr->len) return false;
    ns_json_free(arr->items[i]);
    memmove(arr->items + i, arr->items + i + 1, sizeof(ns_json *) * (arr->len - i - 1));
    arr->len--;
    return true;
}

static member *find_member(const ns_json *obj, const char *key, size_t klen) {
    if (!obj || obj->type != NS_JSON_OBJECT) return NULL;
    for (size_t i = 0; i < obj->len; i++)
        if (obj->members[i].klen == klen && memcmp(obj->members[i].key, key, klen) == 0)
            return &obj->members[i];
    return NULL;
}

ns_json *ns_json_get(const ns_json *obj, const char *key) {
    member *m = find_member(obj, key, strlen(key));
    return m ? m->val : NULL;
}

ns_json *ns_json_path(const ns_json *v, ...) {
    va_list ap;
    va_start(ap, v);
    const char *k;
    while (v && (k = va_arg(ap, const char *)) != NULL) v = ns_json_get(v, k);
    va_end(ap);
    return (ns_json *)v;
}

const char *ns_json_get_str(const ns_json *obj, const char *key) {
    return ns_json_str(ns_json_get(obj, key));
}

static ns_json *set_member(ns_json *obj, char *key, size_t klen, ns_json *val, bool own_key) {
    member *m = find_member(obj, key, klen);
    if (m) {
        ns_json_free(m->val);
        m->val = val;
        if (own_key) free(key);
        return val;
    }
    if (obj->len == obj->cap) {
        obj->cap = obj->cap ? obj->cap * 2 : 4;
        obj->members = ns_xrealloc(obj->members, sizeof(member) * obj->cap);
    }
    obj->members[obj->len].key = own_key ? key : xmemdup(key, klen);
    obj->members[obj->len].klen = klen;
    obj->members[obj->len].val = val;
    obj->len++;
    return val;
}

ns_json *ns_json_set(ns_json *obj, const char *key, ns_json *val) {
    if (!obj || obj->type != NS_JSON_OBJECT) {
        ns_json_free(val);
        return NULL;
    }
    return set_member(obj, (char *)key, strlen(key), val, false);
}

bool ns_json_remove(ns_json *obj, const char *key) {
    member *m = find_member(obj, key, strlen(key));
    if (!m) return false;
    size_t i = (size_t)(m - obj->members);
    free(m->key);
    ns_json_free(m->val);
    memmove(obj->members + i, obj->members + i + 1, sizeof(member) * (obj->len - i - 1));
    obj->len--;
    return true;
}

const char *ns_json_key_at(const ns_json *obj, size_t i) {
    return obj && obj->type == NS_JSON_OBJECT && i < obj->len ? obj->members[i].key : NULL;
}

ns_json *ns_json_value_at(const ns_json *obj, size_t i) {
    return obj && obj->type == NS_JSON_OBJECT && i < obj->len ? obj->members[i].val : NULL;
}

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
            *out = xmemdup(start, (size_t)(q - start));
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
    *out = b.p ? b.p : xmemdup("", 0);
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
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return arr;
    }
    for (;;) {
        ns_json *item = parse_value(ps);
        if (!item) goto bad;
        ns_json_push(arr, item);
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == ']') {
            ps->p++;
            return arr;
        }
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
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return obj;
    }
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"') {
            fail(ps, "expected a string key");
            goto bad;
        }
        if (!parse_string(ps, &key, &klen)) goto bad;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') {
            fail(ps, "expected ':'");
            goto bad;
        }
        ps->p++;
        ns_json *val = parse_value(ps);
        if (!val) goto bad;
        set_member(obj, key, klen, val, true);
        key = NULL;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == '}') {
            ps->p++;
            return obj;
        }
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
        ns_json *v = jnew(NS_JSON_STRING);
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
        size_t n = scan_number(ps->p, (size_t)(ps->end - ps->p));
        if (n) {
            ns_json *v = number_owned(xmemdup(ps->p, n), n);
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

/* ------------------------------------------------------------------ */
/* Quantities                                                          */
/* ------------------------------------------------------------------ */

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
    if (q.format == NS_BINARY_SI) {
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

/* ------------------------------------------------------------------ */
/* Time                                                                */
/* ------------------------------------------------------------------ */

char *ns_rfc3339(int64_t secs, char buf[NS_TIME_MAX]) {
    /* Howard Hinnant's civil_from_days, proleptic Gregorian, UTC. */
    int64_t days = secs / 86400, rem = secs % 86400;
    if (rem < 0) rem += 86400, days -= 1;
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    if (y < 0) y = 0; /* RFC 3339 years are 0000..9999 */
    if (y > 9999) y = 9999;
    snprintf(buf, NS_TIME_MAX, "%04d-%02d-%02dT%02d:%02d:%02dZ", (int)y, (int)m, (int)d, (int)(rem / 3600),
             (int)(rem / 60 % 60), (int)(rem % 60));
    return buf;
}

char *ns_now(char buf[NS_TIME_MAX]) { return ns_rfc3339((int64_t)time(NULL), buf); }

/* ------------------------------------------------------------------ */
/* Conditions                                                          */
/* ------------------------------------------------------------------ */

const char *ns_status_str(ns_status s) {
    switch (s) {
    case NS_TRUE: return "True";
    case NS_FALSE: return "False";
    case NS_UNKNOWN: return "Unknown";
    default: return "";
    }
}

ns_status ns_status_from_bool(bool b) { return b ? NS_TRUE : NS_FALSE; }

ns_status ns_status_parse(const char *s) {
    if (!s) return NS_NONE;
    if (strcmp(s, "True") == 0) return NS_TRUE;
    if (strcmp(s, "False") == 0) return NS_FALSE;
    if (strcmp(s, "Unknown") == 0) return NS_UNKNOWN;
    return NS_NONE;
}

/* ------------------------------------------------------------------ */
/* Node                                                                */
/* ------------------------------------------------------------------ */

struct ns_node {
    ns_json *root;
};

ns_node *ns_node_parse(const char *json, size_t len, ns_error *err) {
    ns_json *root = ns_json_parse(json, len, err);
    if (!root) return NULL;
    const char *bad = NULL;
    if (root->type != NS_JSON_OBJECT) bad = "a Node must be a JSON object";
    else if (ns_json_get(root, "metadata") && ns_json_get(root, "metadata")->type != NS_JSON_OBJECT)
        bad = "a Node's metadata must be a JSON object";
    else if (ns_json_get(root, "status") && ns_json_get(root, "status")->type != NS_JSON_OBJECT)
        bad = "a Node's status must be a JSON object";
    if (bad) {
        ns_json_free(root);
        ns_error_set(err, "%s", bad);
        return NULL;
    }
    ns_node *n = ns_xmalloc(sizeof *n);
    n->root = root;
    return n;
}

ns_node *ns_node_named(const char *name) {
    ns_json *root = ns_json_object();
    ns_json_set(root, "apiVersion", ns_json_string("v1"));
    ns_json_set(root, "kind", ns_json_string("Node"));
    ns_json *md = ns_json_set(root, "metadata", ns_json_object());
    ns_json_set(md, "name", ns_json_string(name));
    ns_json_set(root, "status", ns_json_object());
    ns_node *n = ns_xmalloc(sizeof *n);
    n->root = root;
    return n;
}

char *ns_node_to_json(const ns_node *node, size_t *len) { return ns_json_serialize(node->root, len); }

void ns_node_free(ns_node *node) {
    if (!node) return;
    ns_json_free(node->root);
    free(node);
}

ns_json *ns_node_root(ns_node *node) { return node->root; }

/* metadata or status, created (appended) when missing or not an object. */
static ns_json *section_mut(ns_node *node, const char *name) {
    ns_json *s = ns_json_get(node->root, name);
    if (!s || s->type != NS_JSON_OBJECT) s = ns_json_set(node->root, name, ns_json_object());
    return s;
}

static ns_json *field(const ns_node *node, const char *section, const char *key) {
    ns_json *v = ns_json_get(ns_json_get(node->root, section), key);
    return v && v->type != NS_JSON_NULL ? v : NULL;
}

const char *ns_node_name(const ns_node *node) {
    const char *s = ns_json_str(field(node, "metadata", "name"));
    return s ? s : "";
}

ns_json *ns_node_metadata(const ns_node *node, const char *key) { return field(node, "metadata", key); }
ns_json *ns_node_status(const ns_node *node, const char *key) { return field(node, "status", key); }

void ns_node_set_status(ns_node *node, const char *key, ns_json *value) {
    if (ns_json_equal(field(node, "status", key), value)) {
        ns_json_free(value);
        return;
    }
    ns_json_set(section_mut(node, "status"), key, value);
}

bool ns_node_remove_status(ns_node *node, const char *key) {
    ns_json *s = ns_json_get(node->root, "status");
    return s && ns_json_remove(s, key);
}

/* section.map, read-only: NULL unless an object. */
static ns_json *string_map(const ns_node *node, const char *section, const char *map) {
    ns_json *m = field(node, section, map);
    return m && m->type == NS_JSON_OBJECT ? m : NULL;
}

static ns_json *string_map_mut(ns_node *node, const char *section, const char *map) {
    ns_json *sec = section_mut(node, section);
    ns_json *m = ns_json_get(sec, map);
    if (!m || m->type != NS_JSON_OBJECT) m = ns_json_set(sec, map, ns_json_object());
    return m;
}

static const char *get_in(const ns_node *node, const char *section, const char *map, const char *key) {
    return ns_json_get_str(string_map(node, section, map), key);
}

static void set_in(ns_node *node, const char *section, const char *map, const char *key, const char *value) {
    const char *cur = get_in(node, section, map, key);
    if (cur && strcmp(cur, value) == 0 && ns_json_str_len(ns_json_get(string_map(node, section, map), key)) == strlen(cur))
        return;
    ns_json_set(string_map_mut(node, section, map), key, ns_json_string(value));
}

static bool remove_in(ns_node *node, const char *section, const char *map, const char *key) {
    ns_json *m = string_map(node, section, map);
    return m && ns_json_remove(m, key);
}

const char *ns_node_label(const ns_node *node, const char *key) { return get_in(node, "metadata", "labels", key); }
void ns_node_set_label(ns_node *node, const char *key, const char *value) {
    set_in(node, "metadata", "labels", key, value);
}
bool ns_node_remove_label(ns_node *node, const char *key) { return remove_in(node, "metadata", "labels", key); }

const char *ns_node_annotation(const ns_node *node, const char *key) {
    return get_in(node, "metadata", "annotations", key);
}
void ns_node_set_annotation(ns_node *node, const char *key, const char *value) {
    set_in(node, "metadata", "annotations", key, value);
}
bool ns_node_remove_annotation(ns_node *node, const char *key) {
    return remove_in(node, "metadata", "annotations", key);
}

static bool quantity_in(const ns_node *node, const char *map, const char *name, ns_quantity *out) {
    const char *s = get_in(node, "status", map, name);
    return s && ns_quantity_parse(s, out, NULL);
}

bool ns_node_capacity(const ns_node *node, const char *name, ns_quantity *out) {
    return quantity_in(node, "capacity", name, out);
}
bool ns_node_allocatable(const ns_node *node, const char *name, ns_quantity *out) {
    return quantity_in(node, "allocatable", name, out);
}

void ns_node_set_capacity(ns_node *node, const char *name, ns_quantity q) {
    char buf[NS_QUANTITY_MAX];
    set_in(node, "status", "capacity", name, ns_quantity_format_to(q, buf));
}
void ns_node_set_allocatable(ns_node *node, const char *name, ns_quantity q) {
    char buf[NS_QUANTITY_MAX];
    set_in(node, "status", "allocatable", name, ns_quantity_format_to(q, buf));
}
void ns_node_remove_resource(ns_node *node, const char *name) {
    remove_in(node, "status", "capacity", name);
    remove_in(node, "status", "allocatable", name);
}

const char *ns_node_info(const ns_node *node, const char *f) { return get_in(node, "status", "nodeInfo", f); }
void ns_node_set_info(ns_node *node, const char *f, const char *value) {
    set_in(node, "status", "nodeInfo", f, value);
}

void ns_node_set_addresses(ns_node *node, const ns_address *addrs, size_t n) {
    ns_json *list = ns_json_array();
    for (size_t i = 0; i < n; i++) {
        ns_json *a = ns_json_push(list, ns_json_object());
        ns_json_set(a, "type", ns_json_string(addrs[i].type));
        ns_json_set(a, "address", ns_json_string(addrs[i].address));
    }
    ns_node_set_status(node, "addresses", list);
}

static bool is_type(const ns_json *c, const char *type) {
    const char *t = ns_json_get_str(c, "type");
    return t && strcmp(t, type) == 0;
}

bool ns_node_condition(const ns_node *node, const char *type, ns_condition *out) {
    ns_json *list = field(node, "status", "conditions");
    for (size_t i = 0; i < ns_json_len(list); i++) {
        ns_json *c = ns_json_at(list, i);
        if (!is_type(c, type)) continue;
        const char *status = ns_json_get_str(c, "status");
        if (!status) return false;
        out->type = ns_json_get_str(c, "type");
        out->status = status;
        out->last_heartbeat_time = ns_json_get_str(c, "lastHeartbeatTime");
        out->last_transition_time = ns_json_get_str(c, "lastTransitionTime");
        out->reason = ns_json_get_str(c, "reason");
        out->message = ns_json_get_str(c, "message");
        return true;
    }
    return false;
}

ns_transition ns_node_set_condition(ns_node *node, const char *type, ns_status status, const char *reason,
                                    const char *message) {
    char now[NS_TIME_MAX];
    return ns_node_set_condition_at(node, type, status, reason, message, ns_now(now));
}

ns_transition ns_node_set_condition_at(ns_node *node, const char *type, ns_status status, const char *reason,
                                       const char *message, const char *now) {
    ns_json *st = section_mut(node, "status");
    ns_json *list = ns_json_get(st, "conditions");
    if (!list || list->type != NS_JSON_ARRAY) list = ns_json_set(st, "conditions", ns_json_array());
    ns_json *existing = NULL;
    size_t at = 0;
    for (size_t i = 0; i < list->len; i++)
        if (is_type(list->items[i], type)) {
            existing = list->items[i];
            at = i;
            break;
        }
    ns_status previous = existing ? ns_status_parse(ns_json_get_str(existing, "status")) : NS_NONE;
    bool flipped = previous != status;
    const char *transition = now;
    if (existing && !flipped) {
        const char *t = ns_json_get_str(existing, "lastTransitionTime");
        if (t) transition = t;
    }
    ns_json *c = ns_json_object();
    ns_json_set(c, "type", ns_json_string(type));
    ns_json_set(c, "status", ns_json_string(ns_status_str(status)));
    ns_json_set(c, "lastHeartbeatTime", ns_json_string(now));
    ns_json_set(c, "lastTransitionTime", ns_json_string(transition)); /* copied before existing is freed */
    ns_json_set(c, "reason", ns_json_string(reason ? reason : ""));
    ns_json_set(c, "message", ns_json_string(message ? message : ""));
    if (existing) {
        ns_json_free(existing);
        list->items[at] = c;
    } else {
        ns_json_push(list, c);
    }
    return (ns_transition){previous, status, flipped};
}

bool ns_node_remove_condition(ns_node *node, const char *type) {
    ns_json *list = field(node, "status", "conditions");
    bool found = false;
    for (size_t i = ns_json_len(list); i-- > 0;) {
        if (list->type == NS_JSON_ARRAY && is_type(list->items[i], type)) {
            ns_json_remove_at(list, i);
            found = true;
        }
    }
    return found;
}

/* ------------------------------------------------------------------ */
/* Running a setter                                                    */
/* ------------------------------------------------------------------ */

char *ns_run(ns_set_fn set, const char *json, size_t len, size_t *out_len, ns_error *err) {
    ns_error parse_err = {0};
    ns_node *node = ns_node_parse(json, len, &parse_err);
    if (!node) {
        ns_error_set(err, "the host sent a node that does not parse: %s", parse_err.message);
        ns_error_clear(&parse_err);
        return NULL;
    }
    ns_error set_err = {0};
    int rc = set(node, &set_err);
    if (rc != 0) {
        ns_node_free(node);
        if (err) {
            free(err->message);
            err->message = set_err.message ? set_err.message : ns_xstrdup("setter failed");
        } else {
            ns_error_clear(&set_err);
        }
        return NULL;
    }
    ns_error_clear(&set_err);
    char *out = ns_node_to_json(node, out_len);
    ns_node_free(node);
    return out;
}

/* Shared by the wasm and native host bindings. */
void ns_system_info_free(ns_system_info *info) {
    if (!info) return;
    free(info->hostname);
    free(info->kernel_release);
    free(info->kernel_version);
    free(info->machine);
    free(info->os_release);
    free(info->machine_id);
    free(info->system_uuid);
    free(info->boot_id);
    memset(info, 0, sizeof *info);
}

void ns_network_interfaces_free(ns_network_interface *ifs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(ifs[i].name);
        for (size_t j = 0; j < ifs[i].addresses_len; j++) free(ifs[i].addresses[j].address);
        free(ifs[i].addresses);
    }
    free(ifs);
}
