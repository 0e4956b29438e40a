/*
 * json.c: the JSON DOM (ns_json): building values, reading them, changing
 * objects and arrays. Parsing and writing JSON text are in json_text.c.
 */

#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ns_json *ns__json_new(ns_json_type t) {
    ns_json *v = ns_xmalloc(sizeof *v);
    memset(v, 0, sizeof *v);
    v->type = t;
    return v;
}

ns_json *ns_json_null(void) { return ns__json_new(NS_JSON_NULL); }

ns_json *ns_json_bool(bool b) {
    ns_json *v = ns__json_new(NS_JSON_BOOL);
    v->b = b;
    return v;
}

ns_json *ns_json_string_len(const char *s, size_t len) {
    ns_json *v = ns__json_new(NS_JSON_STRING);
    v->s = ns__memdup(s, len);
    v->slen = len;
    return v;
}

ns_json *ns_json_string(const char *s) { return ns_json_string_len(s, strlen(s)); }

ns_json *ns__json_number_owned(char *text, size_t len) {
    ns_json *v = ns__json_new(NS_JSON_NUMBER);
    v->s = text;
    v->slen = len;
    return v;
}

ns_json *ns_json_int(int64_t n) {
    char buf[32];
    int k = snprintf(buf, sizeof buf, "%lld", (long long)n);
    return ns__json_number_owned(ns__memdup(buf, (size_t)k), (size_t)k);
}

ns_json *ns_json_uint(uint64_t n) {
    char buf[32];
    int k = snprintf(buf, sizeof buf, "%llu", (unsigned long long)n);
    return ns__json_number_owned(ns__memdup(buf, (size_t)k), (size_t)k);
}

/* Length of the JSON number at s (within n bytes), 0 if none. */
size_t ns__json_scan_number(const char *s, size_t n) {
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
    if (n == 0 || ns__json_scan_number(text, n) != n) return NULL;
    return ns__json_number_owned(ns__memdup(text, n), n);
}

ns_json *ns_json_array(void) { return ns__json_new(NS_JSON_ARRAY); }
ns_json *ns_json_object(void) { return ns__json_new(NS_JSON_OBJECT); }

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
    ns_json *c = ns__json_new(v->type);
    c->b = v->b;
    if (v->s) {
        c->s = ns__memdup(v->s, v->slen);
        c->slen = v->slen;
    }
    if (v->type == NS_JSON_ARRAY) {
        for (size_t i = 0; i < v->len; i++) ns_json_push(c, ns_json_clone(v->items[i]));
    } else if (v->type == NS_JSON_OBJECT) {
        c->members = ns_xmalloc(sizeof(member) * (v->len ? v->len : 1));
        c->cap = v->len;
        for (size_t i = 0; i < v->len; i++) {
            c->members[i].key = ns__memdup(v->members[i].key, v->members[i].klen);
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

ns_json *ns__json_set_member(ns_json *obj, char *key, size_t klen, ns_json *val, bool own_key) {
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
    obj->members[obj->len].key = own_key ? key : ns__memdup(key, klen);
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
    return ns__json_set_member(obj, (char *)key, strlen(key), val, false);
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
