/*
 * util.c: allocation that cannot fail (it aborts on out-of-memory), errors,
 * and reading a file.
 */

#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

char *ns__memdup(const char *s, size_t len) {
    char *p = ns_xmalloc(len + 1);
    if (len) memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *ns_xstrdup(const char *s) { return ns__memdup(s, strlen(s)); }

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
