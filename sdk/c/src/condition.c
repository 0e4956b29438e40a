/*
 * condition.c: condition statuses, and setting and removing a node's
 * conditions with the kubelet's heartbeat and transition rules.
 */

#include "internal.h"

#include <string.h>

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

static bool is_type(const ns_json *c, const char *type) {
    const char *t = ns_json_get_str(c, "type");
    return t && strcmp(t, type) == 0;
}

bool ns_node_condition(const ns_node *node, const char *type, ns_condition *out) {
    ns_json *list = ns__node_field(node, "status", "conditions");
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
    ns__node_wrote(node, "conditions", type);
    ns_json *st = ns__node_section_mut(node, "status");
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
    ns__node_wrote(node, "conditions", type);
    ns_json *list = ns__node_field(node, "status", "conditions");
    bool found = false;
    for (size_t i = ns_json_len(list); i-- > 0;) {
        if (list->type == NS_JSON_ARRAY && is_type(list->items[i], type)) {
            ns_json_remove_at(list, i);
            found = true;
        }
    }
    return found;
}
