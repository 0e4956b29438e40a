/*
 * part.c: the part of the node a setter sets (WIT nodestatus:plugin@0.2.1),
 * from what node.c and condition.c recorded, and the changes made through
 * raw access that no helper wrote.
 */

#include "internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const STATUS_MAPS[] = {"capacity", "allocatable", "nodeInfo"};

bool ns__keyed_status(const char *key) {
    return strcmp(key, "capacity") == 0 || strcmp(key, "allocatable") == 0 || strcmp(key, "nodeInfo") == 0 ||
           strcmp(key, "conditions") == 0;
}

/* v[key] when it is an object, else NULL. */
static ns_json *obj(const ns_json *v, const char *key) {
    ns_json *o = ns_json_get(v, key);
    return o && o->type == NS_JSON_OBJECT ? o : NULL;
}

/* Adds each key of the object `from` (or each string of the array `from`)
 * to the set `keys`. */
static void add_keys(ns_json *keys, const ns_json *from) {
    if (!from) return;
    if (from->type == NS_JSON_OBJECT) {
        for (size_t i = 0; i < from->len; i++)
            if (!ns_json_get(keys, from->members[i].key)) ns_json_set(keys, from->members[i].key, ns_json_null());
    } else if (from->type == NS_JSON_ARRAY) {
        for (size_t i = 0; i < from->len; i++) {
            const char *k = ns_json_str(from->items[i]);
            if (k && !ns_json_get(keys, k)) ns_json_set(keys, k, ns_json_null());
        }
    }
}

/* The conditions of `root` with a string type, as a set of their types. */
static void add_condition_types(ns_json *types, const ns_json *root) {
    ns_json *list = ns_json_get(obj(root, "status"), "conditions");
    for (size_t i = 0; list && list->type == NS_JSON_ARRAY && i < list->len; i++) {
        const char *t = ns_json_get_str(list->items[i], "type");
        if (t && !ns_json_get(types, t)) ns_json_set(types, t, ns_json_null());
    }
}

/* The first condition of `type` in `root`, or NULL. */
static ns_json *condition_of(const ns_json *root, const char *type) {
    ns_json *list = ns_json_get(obj(root, "status"), "conditions");
    for (size_t i = 0; list && list->type == NS_JSON_ARRAY && i < list->len; i++) {
        const char *t = ns_json_get_str(list->items[i], "type");
        if (t && strcmp(t, type) == 0) return list->items[i];
    }
    return NULL;
}

/* {key: value now, or null} for each key of the set `keys`. */
static ns_json *map_part(const ns_json *live, const ns_json *keys) {
    ns_json *out = ns_json_object();
    for (size_t i = 0; i < keys->len; i++) {
        ns_json *v = ns_json_get(live, keys->members[i].key);
        ns_json_set(out, keys->members[i].key, v ? ns_json_clone(v) : ns_json_null());
    }
    return out;
}

ns_json *ns_node_part(const ns_node *node) {
    const ns_json *root = node->root;
    ns_json *part = ns_json_object();
    ns_json *md = ns_json_object();
    ns_json *st = ns_json_object();
    static const char *const META_MAPS[] = {"labels", "annotations"};
    for (size_t i = 0; i < 2; i++) {
        ns_json *keys = ns_json_get(node->written, META_MAPS[i]);
        if (ns_json_len(keys)) ns_json_set(md, META_MAPS[i], map_part(obj(obj(root, "metadata"), META_MAPS[i]), keys));
    }

    ns_json *types = ns_json_object();
    add_keys(types, ns_json_get(node->written, "conditions"));
    if (ns_json_get(node->claims, "conditions")) {
        add_keys(types, ns_json_get(node->claims, "conditions"));
        add_condition_types(types, root);
    }
    if (types->len) {
        ns_json *list = ns_json_set(st, "conditions", ns_json_array());
        for (size_t i = 0; i < types->len; i++) {
            ns_json *c = condition_of(root, types->members[i].key);
            if (c) {
                ns_json_push(list, ns_json_clone(c));
            } else {
                ns_json *d = ns_json_push(list, ns_json_object());
                ns_json_set(d, "type", ns_json_string(types->members[i].key));
                ns_json_set(d, "$patch", ns_json_string("delete"));
            }
        }
    }
    ns_json_free(types);

    ns_json *status = obj(root, "status");
    for (size_t i = 0; i < 3; i++) {
        ns_json *keys = ns_json_object();
        add_keys(keys, ns_json_get(node->written, STATUS_MAPS[i]));
        if (ns_json_get(node->claims, STATUS_MAPS[i])) {
            add_keys(keys, ns_json_get(node->claims, STATUS_MAPS[i]));
            add_keys(keys, obj(status, STATUS_MAPS[i]));
        }
        if (keys->len) ns_json_set(st, STATUS_MAPS[i], map_part(obj(status, STATUS_MAPS[i]), keys));
        ns_json_free(keys);
    }
    for (size_t i = 0; i < node->claims->len; i++) {
        const char *key = node->claims->members[i].key;
        if (ns__keyed_status(key)) continue;
        ns_json *v = ns_json_get(status, key);
        ns_json_set(st, key, v ? ns_json_clone(v) : ns_json_null());
    }

    if (md->len) ns_json_set(part, "metadata", md);
    else ns_json_free(md);
    if (st->len) ns_json_set(part, "status", st);
    else ns_json_free(st);
    return part;
}

char *ns_node_part_json(const ns_node *node, size_t *len) {
    ns_json *part = ns_node_part(node);
    char *out = ns_json_serialize(part, len);
    ns_json_free(part);
    return out;
}

/* ---- changes made through raw access ---- */

/* Whether a[key] and b[key] differ (one absent counts). */
static bool differs(const ns_json *a, const ns_json *b, const char *key) {
    ns_json *va = ns_json_get(a, key), *vb = ns_json_get(b, key);
    return !ns_json_equal(va, vb);
}

/* The keys of the objects a and b, as a set. */
static ns_json *key_union(const ns_json *a, const ns_json *b) {
    ns_json *keys = ns_json_object();
    add_keys(keys, a);
    add_keys(keys, b);
    return keys;
}

static char *path(const char *fmt, const char *a, const char *b) {
    ns_error e = {0};
    ns_error_set(&e, fmt, a, b);
    return e.message;
}

/* The first key of `section.map` that differs and that the setter did not
 * write, as a path. */
static char *untracked_in_map(const ns_node *node, const char *section, const char *map, const ns_json *b,
                              const ns_json *a) {
    ns_json *written = ns_json_get(node->written, map);
    ns_json *keys = key_union(b, a);
    char *out = NULL;
    for (size_t i = 0; !out && i < keys->len; i++) {
        const char *k = keys->members[i].key;
        if (differs(b, a, k) && !ns_json_get(written, k)) out = path(section, map, k);
    }
    ns_json_free(keys);
    return out;
}

char *ns__node_untracked(const ns_node *node) {
    const ns_json *before = node->snapshot, *after = node->root;
    if (!before) return NULL;
    char *out = NULL;
    ns_json *keys = key_union(before, after);
    for (size_t i = 0; !out && i < keys->len; i++) {
        const char *k = keys->members[i].key;
        if (strcmp(k, "metadata") != 0 && strcmp(k, "status") != 0 && differs(before, after, k))
            out = path("%s%s", k, "");
    }
    ns_json_free(keys);

    ns_json *mb = obj(before, "metadata"), *ma = obj(after, "metadata");
    keys = key_union(mb, ma);
    for (size_t i = 0; !out && i < keys->len; i++) {
        const char *k = keys->members[i].key;
        if (!differs(mb, ma, k)) continue;
        if (strcmp(k, "labels") == 0 || strcmp(k, "annotations") == 0)
            out = untracked_in_map(node, "metadata.%s[%s]", k, obj(mb, k), obj(ma, k));
        else
            out = path("metadata.%s%s", k, "");
    }
    ns_json_free(keys);

    ns_json *sb = obj(before, "status"), *sa = obj(after, "status");
    keys = key_union(sb, sa);
    for (size_t i = 0; !out && i < keys->len; i++) {
        const char *k = keys->members[i].key;
        if (!differs(sb, sa, k) || ns_json_get(node->claims, k)) continue;
        if (strcmp(k, "conditions") == 0) {
            ns_json *types = ns_json_object(), *written = ns_json_get(node->written, "conditions");
            add_condition_types(types, before);
            add_condition_types(types, after);
            for (size_t j = 0; !out && j < types->len; j++) {
                const char *t = types->members[j].key;
                if (!ns_json_equal(condition_of(before, t), condition_of(after, t)) && !ns_json_get(written, t))
                    out = path("status.conditions[%s]%s", t, "");
            }
            ns_json_free(types);
        } else if (ns__keyed_status(k)) {
            out = untracked_in_map(node, "status.%s[%s]", k, obj(sb, k), obj(sa, k));
        } else {
            out = path("status.%s%s", k, "");
        }
    }
    ns_json_free(keys);
    return out;
}
