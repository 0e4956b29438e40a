/*
 * nodestatus_native.c: native stand-ins for the host functions, so that a
 * setter's source can be unit-tested without a WebAssembly host. Compile it
 * (with -DNODESTATUS_NATIVE) instead of nodestatus_wasm.c.
 *
 * config() and node_problems() answer what the test set; log() writes to the
 * FILE given to ns_native_set_log (nowhere by default); record_event() is
 * dropped; system_info() reads the local machine; network_interfaces() is
 * empty; statvfs() is refused, as outside the host nothing is granted.
 */
#ifndef NODESTATUS_NATIVE
#define NODESTATUS_NATIVE
#endif
#include "nodestatus.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *native_config;
static char **native_problems;
static size_t native_problems_len;
static FILE *native_log;

void ns_native_set_config(const char *json) {
    free(native_config);
    native_config = json ? ns_xstrdup(json) : NULL;
}

void ns_native_set_problems(const char *const *problems) {
    ns_strings_free(native_problems, native_problems_len);
    native_problems = NULL;
    native_problems_len = 0;
    for (size_t i = 0; problems && problems[i]; i++) {
        native_problems = ns_xrealloc(native_problems, sizeof(char *) * (i + 1));
        native_problems[i] = ns_xstrdup(problems[i]);
        native_problems_len = i + 1;
    }
}

void ns_native_set_log(FILE *f) { native_log = f; }

void ns_log(ns_log_level level, const char *fmt, ...) {
    static const char *names[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR"};
    if (!native_log) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(native_log, "%s ", (unsigned)level < 5 ? names[level] : "?");
    vfprintf(native_log, fmt, ap);
    fputc('\n', native_log);
    va_end(ap);
}

char *ns_config_json(void) { return ns_xstrdup(native_config ? native_config : "{}"); }

ns_json *ns_config(ns_error *err) {
    char *s = ns_config_json();
    ns_error e = {0};
    ns_json *v = ns_json_parse(s, strlen(s), &e);
    free(s);
    if (!v) ns_error_set(err, "invalid plugin config: %s", e.message);
    ns_error_clear(&e);
    return v;
}

void ns_record_event(ns_event_type type, const char *reason, const char *message) {
    (void)type;
    (void)reason;
    (void)message;
}

static char *read_trimmed(const char *path) {
    char *s = ns_read_file(path, 1 << 20, NULL);
    if (!s) return ns_xstrdup("");
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

void ns_system_info_get(ns_system_info *out) {
    out->hostname = read_trimmed("/proc/sys/kernel/hostname");
    out->kernel_release = read_trimmed("/proc/sys/kernel/osrelease");
    out->kernel_version = read_trimmed("/proc/sys/kernel/version");
#if defined(__x86_64__)
    out->machine = ns_xstrdup("x86_64");
#elif defined(__aarch64__)
    out->machine = ns_xstrdup("aarch64");
#else
    out->machine = ns_xstrdup("unknown");
#endif
    char *os = ns_read_file("/etc/os-release", 1 << 20, NULL);
    out->os_release = os ? os : ns_xstrdup("");
    out->machine_id = read_trimmed("/etc/machine-id");
    out->system_uuid = read_trimmed("/sys/class/dmi/id/product_uuid");
    out->boot_id = read_trimmed("/proc/sys/kernel/random/boot_id");
    out->cpus = 1;
}

size_t ns_network_interfaces(ns_network_interface **out) {
    *out = NULL;
    return 0;
}

int ns_statvfs(const char *path, ns_fs_stats *out, ns_error *err) {
    memset(out, 0, sizeof *out);
    return ns_error_set(err, "statvfs(\"%s\") is not available outside the host", path);
}

size_t ns_node_problems(char ***out) {
    *out = NULL;
    if (!native_problems_len) return 0;
    *out = ns_xmalloc(sizeof(char *) * native_problems_len);
    for (size_t i = 0; i < native_problems_len; i++) (*out)[i] = ns_xstrdup(native_problems[i]);
    return native_problems_len;
}

void ns_strings_free(char **list, size_t n) {
    for (size_t i = 0; i < n; i++) free(list[i]);
    free(list);
}
