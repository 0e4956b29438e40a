/*
 * nodestatus_native.c: native stand-ins for the host functions, so that a
 * setter's source can be unit-tested without a WebAssembly host. Compile it
 * (with -DNODESTATUS_NATIVE) instead of nodestatus_wasm.c.
 *
 * config() and node_problems() answer what the test set; log() writes to the
 * FILE given to ns_native_set_log (nowhere by default); record_event() is
 * dropped; system_info() reads the local machine; network_interfaces() is
 * empty; statvfs() is refused, as outside the host nothing is granted.
 * ns_native_merge and ns_native_apply merge a setter's part into the node as
 * the host does.
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

/* The events recorded since ns_native_take_events, one a line. */
static char *native_events;
static size_t native_events_len;

void ns_record_event(ns_event_type type, const char *reason, const char *message) {
    const char *t = type == NS_EVENT_WARNING ? "Warning" : "Normal";
    if (!reason) reason = "";
    if (!message) message = "";
    size_t n = strlen(t) + strlen(reason) + strlen(message) + 4;
    native_events = ns_xrealloc(native_events, native_events_len + n + 1);
    native_events_len += (size_t)snprintf(native_events + native_events_len, n + 1, "%s %s: %s\n", t, reason, message);
}

char *ns_native_take_events(void) {
    char *out = native_events ? native_events : ns_xstrdup("");
    native_events = NULL;
    native_events_len = 0;
    return out;
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

/* ---- the host's merge of a part ---- */

static char *last_part;

const char *ns_native_last_part(void) { return last_part; }

static bool is_map(const char *section, const char *key) {
    if (strcmp(section, "metadata") == 0) return strcmp(key, "labels") == 0 || strcmp(key, "annotations") == 0;
    return strcmp(section, "status") == 0 &&
           (strcmp(key, "capacity") == 0 || strcmp(key, "allocatable") == 0 || strcmp(key, "nodeInfo") == 0);
}

/* obj[key] as an object, created (or replacing a non-object) when needed. */
static ns_json *object_in(ns_json *obj, const char *key) {
    ns_json *v = ns_json_get(obj, key);
    if (!v || ns_json_typeof(v) != NS_JSON_OBJECT) v = ns_json_set(obj, key, ns_json_object());
    return v;
}

static void merge_conditions(ns_json *status, const ns_json *conditions, const char *now) {
    ns_json *list = ns_json_get(status, "conditions");
    if (!list || ns_json_typeof(list) != NS_JSON_ARRAY) list = ns_json_set(status, "conditions", ns_json_array());
    for (size_t i = 0; i < ns_json_len(conditions); i++) {
        const ns_json *c = ns_json_at(conditions, i);
        const char *type = ns_json_get_str(c, "type");
        if (!type) continue;
        size_t at = ns_json_len(list);
        for (size_t j = 0; j < ns_json_len(list); j++) {
            const char *t = ns_json_get_str(ns_json_at(list, j), "type");
            if (t && strcmp(t, type) == 0) {
                at = j;
                break;
            }
        }
        const char *patch = ns_json_get_str(c, "$patch");
        if (patch && strcmp(patch, "delete") == 0) {
            if (at < ns_json_len(list)) ns_json_remove_at(list, at);
            continue;
        }
        ns_json *next = ns_json_clone(c);
        const ns_json *old = at < ns_json_len(list) ? ns_json_at(list, at) : NULL;
        const char *old_status = ns_json_get_str(old, "status"), *new_status = ns_json_get_str(c, "status");
        const char *kept = ns_json_get_str(old, "lastTransitionTime");
        bool same = old_status && new_status && strcmp(old_status, new_status) == 0 && kept;
        ns_json_set(next, "lastHeartbeatTime", ns_json_string(now));
        ns_json_set(next, "lastTransitionTime", ns_json_string(same ? kept : now));
        if (at < ns_json_len(list)) {
            /* Replace in place: remove, then move the new one to its index. */
            ns_json *arr = ns_json_array();
            for (size_t j = 0; j < ns_json_len(list); j++)
                ns_json_push(arr, j == at ? next : ns_json_clone(ns_json_at(list, j)));
            list = ns_json_set(status, "conditions", arr);
        } else {
            ns_json_push(list, next);
        }
    }
}

char *ns_native_merge(const char *node_json, const char *part_json, const char *now, ns_error *err) {
    ns_error e = {0};
    ns_json *node = ns_json_parse(node_json, strlen(node_json), &e);
    if (!node || ns_json_typeof(node) != NS_JSON_OBJECT) {
        ns_error_set(err, "the node does not parse: %s", e.message ? e.message : "not an object");
        ns_error_clear(&e);
        ns_json_free(node);
        return NULL;
    }
    ns_json *part = NULL;
    if (part_json) {
        part = ns_json_parse(part_json, strlen(part_json), &e);
        if (!part || ns_json_typeof(part) != NS_JSON_OBJECT) {
            ns_error_set(err, "the part does not parse: %s", e.message ? e.message : "not an object");
            ns_error_clear(&e);
            ns_json_free(part);
            ns_json_free(node);
            return NULL;
        }
    }
    char ts[NS_TIME_MAX];
    if (!now) now = ns_now(ts);
    for (size_t i = 0; i < ns_json_len(part); i++) {
        const char *section = ns_json_key_at(part, i);
        const ns_json *fields = ns_json_value_at(part, i);
        if (strcmp(section, "kind") == 0 || strcmp(section, "apiVersion") == 0 ||
            ns_json_typeof(fields) != NS_JSON_OBJECT)
            continue;
        ns_json *target = object_in(node, section);
        for (size_t j = 0; j < ns_json_len(fields); j++) {
            const char *key = ns_json_key_at(fields, j);
            const ns_json *value = ns_json_value_at(fields, j);
            if (strcmp(section, "metadata") == 0 && strcmp(key, "name") == 0) continue;
            if (is_map(section, key) && ns_json_typeof(value) == NS_JSON_OBJECT) {
                bool sets = false;
                for (size_t k = 0; k < ns_json_len(value); k++)
                    sets = sets || ns_json_typeof(ns_json_value_at(value, k)) != NS_JSON_NULL;
                if (!sets && !ns_json_get(target, key)) continue; /* no map made to remove from */
                ns_json *m = object_in(target, key);
                for (size_t k = 0; k < ns_json_len(value); k++) {
                    const ns_json *v = ns_json_value_at(value, k);
                    if (ns_json_typeof(v) == NS_JSON_NULL) ns_json_remove(m, ns_json_key_at(value, k));
                    else ns_json_set(m, ns_json_key_at(value, k), ns_json_clone(v));
                }
            } else if (strcmp(section, "status") == 0 && strcmp(key, "conditions") == 0 &&
                       ns_json_typeof(value) == NS_JSON_ARRAY) {
                merge_conditions(target, value, now);
            } else if (ns_json_typeof(value) == NS_JSON_NULL) {
                ns_json_remove(target, key);
            } else {
                ns_json_set(target, key, ns_json_clone(value));
            }
        }
    }
    char *out = ns_json_serialize(node, NULL);
    ns_json_free(node);
    ns_json_free(part);
    return out;
}

char *ns_native_apply(ns_set_fn set, const char *json, ns_error *err) {
    free(last_part);
    last_part = ns_run(set, json, strlen(json), NULL, err);
    if (!last_part) return NULL;
    return ns_native_merge(json, last_part, NULL, err);
}
