/*
 * node.c: the Node: parsing it, its sections, labels, annotations,
 * capacity and allocatable, nodeInfo and addresses, and the record of what
 * the setter wrote (part.c makes the part from it).
 */

#include "internal.h"

#include <stdlib.h>
#include <string.h>

static ns_node *node_new(ns_json *root) {
    ns_node *n = ns_xmalloc(sizeof *n);
    n->root = root;
    n->written = ns_json_object();
    n->claims = ns_json_object();
    n->snapshot = NULL;
    return n;
}

void ns__node_wrote(ns_node *node, const char *map, const char *key) {
    ns_json *keys = ns_json_get(node->written, map);
    if (!keys) keys = ns_json_set(node->written, map, ns_json_object());
    if (!ns_json_get(keys, key)) ns_json_set(keys, key, ns_json_null());
}

void ns__node_claim(ns_node *node, const char *key) {
    if (ns_json_get(node->claims, key)) return;
    ns_json *held;
    if (strcmp(key, "conditions") == 0) {
        held = ns_json_array();
        ns_json *list = ns__node_field(node, "status", "conditions");
        for (size_t i = 0; list && list->type == NS_JSON_ARRAY && i < list->len; i++) {
            const char *t = ns_json_get_str(list->items[i], "type");
            if (t) ns_json_push(held, ns_json_string(t));
        }
    } else if (ns__keyed_status(key)) {
        held = ns_json_array();
        ns_json *m = ns__node_field(node, "status", key);
        for (size_t i = 0; m && m->type == NS_JSON_OBJECT && i < m->len; i++)
            ns_json_push(held, ns_json_string(m->members[i].key));
    } else {
        held = ns_json_null();
    }
    ns_json_set(node->claims, key, held);
}

/* Raw access begins: keep the node as it is, to find changes made there. */
static void snapshot(const ns_node *node) {
    ns_node *n = (ns_node *)node; /* the record, not the node, changes */
    if (!n->snapshot) n->snapshot = ns_json_clone(n->root);
}

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
    return node_new(root);
}

ns_node *ns_node_named(const char *name) {
    ns_json *root = ns_json_object();
    ns_json_set(root, "apiVersion", ns_json_string("v1"));
    ns_json_set(root, "kind", ns_json_string("Node"));
    ns_json *md = ns_json_set(root, "metadata", ns_json_object());
    ns_json_set(md, "name", ns_json_string(name));
    ns_json_set(root, "status", ns_json_object());
    return node_new(root);
}

char *ns_node_to_json(const ns_node *node, size_t *len) { return ns_json_serialize(node->root, len); }

void ns_node_free(ns_node *node) {
    if (!node) return;
    ns_json_free(node->root);
    ns_json_free(node->written);
    ns_json_free(node->claims);
    ns_json_free(node->snapshot);
    free(node);
}

ns_json *ns_node_root(ns_node *node) {
    snapshot(node);
    return node->root;
}

/* metadata or status, created (appended) when missing or not an object. */
ns_json *ns__node_section_mut(ns_node *node, const char *name) {
    ns_json *s = ns_json_get(node->root, name);
    if (!s || s->type != NS_JSON_OBJECT) s = ns_json_set(node->root, name, ns_json_object());
    return s;
}

ns_json *ns__node_field(const ns_node *node, const char *section, const char *key) {
    ns_json *v = ns_json_get(ns_json_get(node->root, section), key);
    return v && v->type != NS_JSON_NULL ? v : NULL;
}

const char *ns_node_name(const ns_node *node) {
    const char *s = ns_json_str(ns__node_field(node, "metadata", "name"));
    return s ? s : "";
}

ns_json *ns_node_metadata(const ns_node *node, const char *key) {
    snapshot(node);
    return ns__node_field(node, "metadata", key);
}
ns_json *ns_node_status(const ns_node *node, const char *key) {
    snapshot(node);
    return ns__node_field(node, "status", key);
}

void ns_node_set_status(ns_node *node, const char *key, ns_json *value) {
    ns__node_claim(node, key);
    if (ns_json_equal(ns__node_field(node, "status", key), value)) {
        ns_json_free(value);
        return;
    }
    ns_json_set(ns__node_section_mut(node, "status"), key, value);
}

bool ns_node_remove_status(ns_node *node, const char *key) {
    ns__node_claim(node, key);
    ns_json *s = ns_json_get(node->root, "status");
    return s && s->type == NS_JSON_OBJECT && ns_json_remove(s, key);
}

ns_json *ns_node_status_mut(ns_node *node, const char *key, ns_json *default_value) {
    ns__node_claim(node, key);
    ns_json *s = ns__node_section_mut(node, "status");
    ns_json *v = ns_json_get(s, key);
    if (v && v->type != NS_JSON_NULL) {
        ns_json_free(default_value);
        return v;
    }
    return ns_json_set(s, key, default_value ? default_value : ns_json_object());
}

/* section.map, read-only: NULL unless an object. */
static ns_json *string_map(const ns_node *node, const char *section, const char *map) {
    ns_json *m = ns__node_field(node, section, map);
    return m && m->type == NS_JSON_OBJECT ? m : NULL;
}

static ns_json *string_map_mut(ns_node *node, const char *section, const char *map) {
    ns_json *sec = ns__node_section_mut(node, section);
    ns_json *m = ns_json_get(sec, map);
    if (!m || m->type != NS_JSON_OBJECT) m = ns_json_set(sec, map, ns_json_object());
    return m;
}

static const char *get_in(const ns_node *node, const char *section, const char *map, const char *key) {
    return ns_json_get_str(string_map(node, section, map), key);
}

static void set_in(ns_node *node, const char *section, const char *map, const char *key, const char *value) {
    ns__node_wrote(node, map, key);
    const char *cur = get_in(node, section, map, key);
    if (cur && strcmp(cur, value) == 0 && ns_json_str_len(ns_json_get(string_map(node, section, map), key)) == strlen(cur))
        return;
    ns_json_set(string_map_mut(node, section, map), key, ns_json_string(value));
}

static bool remove_in(ns_node *node, const char *section, const char *map, const char *key) {
    ns__node_wrote(node, map, key);
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
