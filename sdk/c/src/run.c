/*
 * run.c: running a setter (set, or a reactor's on_lines) over a node's JSON
 * into its part, and freeing what the host functions return (shared by the
 * wasm and the native host bindings).
 */

#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* What run calls: set, or on_lines with its lines. */
typedef struct call {
    ns_set_fn set;
    ns_lines_fn on_lines;
    const ns_lines *lines;
} call;

static char *run(call c, const char *json, size_t len, size_t *out_len, ns_error *err);

char *ns_run(ns_set_fn set, const char *json, size_t len, size_t *out_len, ns_error *err) {
    return run((call){.set = set}, json, len, out_len, err);
}

char *ns_run_lines(ns_lines_fn on_lines, const char *json, size_t len, const ns_lines *lines,
                   size_t *out_len, ns_error *err) {
    static const ns_lines none = {0};
    return run((call){.on_lines = on_lines, .lines = lines ? lines : &none}, json, len, out_len, err);
}

static char *run(call c, const char *json, size_t len, size_t *out_len, ns_error *err) {
    ns_error parse_err = {0};
    ns_node *node = ns_node_parse(json, len, &parse_err);
    if (!node) {
        ns_error_set(err, "the host sent a node that does not parse: %s", parse_err.message);
        ns_error_clear(&parse_err);
        return NULL;
    }
    ns_error set_err = {0};
    int rc = c.set ? c.set(node, &set_err) : c.on_lines(node, c.lines, &set_err);
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
    char *where = ns__node_untracked(node);
    if (where) {
        ns_error_set(err,
                     "the setter changed %s through ns_node_root (or a value that ns_node_status or "
                     "ns_node_metadata returned): the SDK cannot tell which fields it sets; change it with the "
                     "node's helpers (ns_node_set_label, ns_node_set_condition, ns_node_set_capacity, ...) or "
                     "ns_node_status_mut",
                     where);
        free(where);
        ns_node_free(node);
        return NULL;
    }
    /* The part only: the fields the setter wrote. */
    char *out = ns_node_part_json(node, out_len);
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
