/*
 * nodestatus_wasm.c: the glue between the SDK and the C bindings that
 * `wit-bindgen c wit --world plugin` generates (plugin.h, plugin.c,
 * plugin_component_type.o) from the wit/ directory: the world
 * nodestatus:plugin/plugin@0.2.1, which exports setter@0.2.1 and imports
 * host@0.1.1 (wit/deps/plugin-0.1); with two versions of the package, the
 * bindings' names carry the version (nodestatus_plugin_0_1_1_host_log,
 * exports_nodestatus_plugin_0_2_1_setter_set). Compile it with the plugin
 * for wasm32-wasi; the plugin itself never sees the bindings. A reactor's
 * bindings are those of the world reactor-plugin generated with
 * `--rename-world plugin` (the same names), and nodestatus_reactor_wasm.c
 * adds its exports.
 *
 * Ownership, as the generated bindings define it:
 * - an exported function's string arguments belong to the callee, which
 *   frees them (plugin_string_free);
 * - an exported function's results must be malloc'd: the generated
 *   post-return functions free() them after the host has copied them;
 * - an imported function's results are allocated with cabi_realloc and
 *   belong to the caller (the *_free helpers); its arguments are borrowed.
 * Every string handed to the host is valid UTF-8 (ns_utf8_sanitize), since
 * the host refuses anything else.
 */
#include "nodestatus.h"
#include "plugin.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shared with nodestatus_reactor_wasm.c (the same bindings). */
plugin_string_t ns__out_string(const char *s);
plugin_list_string_t ns__out_list(const char *const *items);
bool ns__out_part(char *out, size_t len, ns_error *e, plugin_option_string_t *ret, plugin_string_t *err);

/* A malloc'd, UTF-8 component-model string from a C string (NULL = ""). */
plugin_string_t ns__out_string(const char *s) {
    plugin_string_t r;
    if (!s) s = "";
    r.ptr = (uint8_t *)ns_utf8_sanitize(s, strlen(s), &r.len);
    return r;
}

/* A NUL-terminated copy of a string the host gave us; frees the original. */
static char *take_string(plugin_string_t *s) {
    char *c = ns_xmalloc(s->len + 1);
    if (s->len) memcpy(c, s->ptr, s->len);
    c[s->len] = '\0';
    plugin_string_free(s);
    return c;
}

plugin_list_string_t ns__out_list(const char *const *items) {
    plugin_list_string_t l = {NULL, 0};
    size_t n = 0;
    while (items && items[n]) n++;
    if (n == 0) return l;
    l.ptr = ns_xmalloc(sizeof(plugin_string_t) * n);
    for (size_t i = 0; i < n; i++) l.ptr[i] = ns__out_string(items[i]);
    l.len = n;
    return l;
}

/* ---- exports ---- */

void exports_nodestatus_plugin_0_2_1_setter_metadata(exports_nodestatus_plugin_0_2_1_setter_plugin_info_t *ret) {
    ns_metadata m = nodestatus_plugin_metadata();
    ret->name = ns__out_string(m.name);
    ret->version = ns__out_string(m.version);
    ret->description = ns__out_string(m.description);
    ret->paths = ns__out_list(m.paths);
    ret->env = ns__out_list(m.env);
    ret->affects_readiness = m.affects_readiness;
}

/* set: result<option<string>, string>. The SDK always returns some(part),
 * the fields the setter wrote ("{}" when it wrote none), never none. */
bool exports_nodestatus_plugin_0_2_1_setter_set(plugin_string_t *node, plugin_option_string_t *ret,
                                               plugin_string_t *err) {
    ns_error e = {0};
    size_t len = 0;
    char *out = ns_run(nodestatus_plugin_set, (const char *)node->ptr, node->len, &len, &e);
    plugin_string_free(node);
    return ns__out_part(out, len, &e, ret, err);
}

bool ns__out_part(char *out, size_t len, ns_error *e, plugin_option_string_t *ret, plugin_string_t *err) {
    if (!out) {
        *err = ns__out_string(e->message ? e->message : "setter failed");
        ns_error_clear(e);
        return false;
    }
    /* The serializer writes valid UTF-8 already: hand the buffer over. */
    ret->is_some = true;
    ret->val.ptr = (uint8_t *)out;
    ret->val.len = len;
    return true;
}

/* ---- host functions ---- */

void ns_log(ns_log_level level, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    char *s = ns_xmalloc(n > 0 ? (size_t)n + 1 : 1);
    if (n > 0)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    else
        s[0] = '\0';
    va_end(ap);
    plugin_string_t msg = ns__out_string(s);
    free(s);
    nodestatus_plugin_0_1_1_host_log((nodestatus_plugin_0_1_1_host_level_t)level, &msg);
    free(msg.ptr);
}

char *ns_config_json(void) {
    plugin_string_t s;
    nodestatus_plugin_0_1_1_host_config(&s);
    return take_string(&s);
}

ns_json *ns_config(ns_error *err) {
    plugin_string_t s;
    nodestatus_plugin_0_1_1_host_config(&s);
    ns_error e = {0};
    ns_json *v = ns_json_parse((const char *)s.ptr, s.len, &e);
    plugin_string_free(&s);
    if (!v) ns_error_set(err, "invalid plugin config: %s", e.message);
    ns_error_clear(&e);
    return v;
}

void ns_record_event(ns_event_type type, const char *reason, const char *message) {
    plugin_string_t r = ns__out_string(reason), m = ns__out_string(message);
    nodestatus_plugin_0_1_1_host_record_event(type == NS_EVENT_WARNING ? NODESTATUS_PLUGIN_0_1_1_HOST_EVENT_TYPE_WARNING
                                                                 : NODESTATUS_PLUGIN_0_1_1_HOST_EVENT_TYPE_NORMAL,
                                        &r, &m);
    free(r.ptr);
    free(m.ptr);
}

void ns_system_info_get(ns_system_info *out) {
    nodestatus_plugin_0_1_1_host_system_info_t s;
    nodestatus_plugin_0_1_1_host_system(&s);
    out->hostname = take_string(&s.hostname);
    out->kernel_release = take_string(&s.kernel_release);
    out->kernel_version = take_string(&s.kernel_version);
    out->machine = take_string(&s.machine);
    out->os_release = take_string(&s.os_release);
    out->machine_id = take_string(&s.machine_id);
    out->system_uuid = take_string(&s.system_uuid);
    out->boot_id = take_string(&s.boot_id);
    out->cpus = s.cpus;
}

size_t ns_network_interfaces(ns_network_interface **out) {
    nodestatus_plugin_0_1_1_host_list_network_interface_t l;
    nodestatus_plugin_0_1_1_host_network_interfaces(&l);
    *out = NULL;
    if (l.len == 0) return 0;
    ns_network_interface *ifs = ns_xmalloc(sizeof *ifs * l.len);
    for (size_t i = 0; i < l.len; i++) {
        nodestatus_plugin_0_1_1_host_network_interface_t *h = &l.ptr[i];
        ifs[i].name = take_string(&h->name);
        ifs[i].up = h->up;
        ifs[i].loopback = h->loopback;
        ifs[i].addresses_len = h->addresses.len;
        ifs[i].addresses = ns_xmalloc(sizeof(ns_ip_address) * (h->addresses.len ? h->addresses.len : 1));
        for (size_t j = 0; j < h->addresses.len; j++) {
            ifs[i].addresses[j].address = take_string(&h->addresses.ptr[j].address);
            ifs[i].addresses[j].prefix_len = h->addresses.ptr[j].prefix_len;
        }
    }
    size_t n = l.len;
    nodestatus_plugin_0_1_1_host_list_network_interface_free(&l); /* the strings were taken */
    *out = ifs;
    return n;
}

int ns_statvfs(const char *path, ns_fs_stats *out, ns_error *err) {
    plugin_string_t p = ns__out_string(path), e;
    nodestatus_plugin_0_1_1_host_fs_stats_t st;
    bool ok = nodestatus_plugin_0_1_1_host_statvfs(&p, &st, &e);
    free(p.ptr);
    memset(out, 0, sizeof *out);
    if (!ok) {
        char *m = take_string(&e);
        ns_error_set(err, "%s", m);
        free(m);
        return -1;
    }
    out->total_bytes = st.total_bytes;
    out->free_bytes = st.free_bytes;
    out->available_bytes = st.available_bytes;
    out->total_inodes = st.total_inodes;
    out->free_inodes = st.free_inodes;
    out->read_only = st.read_only;
    return 0;
}

size_t ns_node_problems(char ***out) {
    plugin_list_string_t l;
    nodestatus_plugin_0_1_1_host_node_problems(&l);
    *out = NULL;
    if (l.len == 0) return 0;
    char **list = ns_xmalloc(sizeof(char *) * l.len);
    for (size_t i = 0; i < l.len; i++) list[i] = take_string(&l.ptr[i]);
    size_t n = l.len;
    plugin_list_string_free(&l);
    *out = list;
    return n;
}

void ns_strings_free(char **list, size_t n) {
    for (size_t i = 0; i < n; i++) free(list[i]);
    free(list);
}
