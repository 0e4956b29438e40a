/*
 * internal.h: what the SDK's own files share and a setter never needs: the
 * layout of a JSON value, and the helpers the parser and the condition code
 * use. Not part of the API (see nodestatus.h).
 */
#ifndef NODESTATUS_INTERNAL_H
#define NODESTATUS_INTERNAL_H

#include "../nodestatus.h"

#include <stddef.h>

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

/* A malloc'd, NUL-terminated copy of len bytes (util.c). */
char *ns__memdup(const char *s, size_t len);

/* A new value of this type (json.c). */
ns_json *ns__json_new(ns_json_type t);
/* A number whose text is the malloc'd `text`, taken over (json.c). */
ns_json *ns__json_number_owned(char *text, size_t len);
/* Length of the JSON number at s (within n bytes), 0 if none (json.c). */
size_t ns__json_scan_number(const char *s, size_t n);
/* Sets obj[key] = val, replacing (and freeing) an earlier value in its place;
 * takes over key when own_key (json.c). Returns val. */
ns_json *ns__json_set_member(ns_json *obj, char *key, size_t klen, ns_json *val, bool own_key);

/* A Node, and what the setter wrote in it (node.c, part.c). */
struct ns_node {
    ns_json *root;
    /* "labels", "annotations", "capacity", "allocatable", "nodeInfo",
     * "conditions" -> an object whose keys are the keys (condition types)
     * written, in first-written order (the values are null). */
    ns_json *written;
    /* A claimed status key -> an array of the keys (condition types) it held
     * when claimed, or null for a whole field. */
    ns_json *claims;
    /* The root when raw access began (ns_node_root, ns_node_status,
     * ns_node_metadata), to find changes made there; NULL before. */
    ns_json *snapshot;
};

/* Records that the setter wrote `key` of `map` (see `written`) (node.c). */
void ns__node_wrote(ns_node *node, const char *map, const char *key);
/* Records that the setter sets status.key whole (see `claims`) (node.c). */
void ns__node_claim(ns_node *node, const char *key);
/* The first change made through raw access that no helper wrote, as a
 * malloc'd path ("metadata.labels[x]"), or NULL (part.c). */
char *ns__node_untracked(const ns_node *node);
/* Whether status.key is a keyed section (part.c). */
bool ns__keyed_status(const char *key);

/* The node's metadata or status, created (appended) when missing or not an
 * object (node.c). */
ns_json *ns__node_section_mut(ns_node *node, const char *name);
/* node.section.key, or NULL when missing or null (node.c). */
ns_json *ns__node_field(const ns_node *node, const char *section, const char *key);

#endif
