/*
 * oom-kill: an OOMKill condition and a Warning event when the kernel's OOM
 * killer kills a process ("Out of memory: Killed process 4242 (stress)").
 */
#include "nodestatus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ns_metadata metadata(void) {
    return (ns_metadata){.name = "oom-kill",
                         .version = "0.1.0",
                         .description = "OOMKill condition from the kernel log"};
}

/* Each pass: the condition as the node holds it (on_lines set it), False
 * until the OOM killer kills. */
static int set(ns_node *node, ns_error *err) {
    (void)err;
    ns_condition c;
    if (ns_node_condition(node, "OOMKill", &c))
        ns_node_set_condition(node, "OOMKill", ns_status_parse(c.status), c.reason, c.message);
    else
        ns_node_set_condition(node, "OOMKill", NS_FALSE, "NoOOMKill", "");
    return 0;
}

/* Once at load: the kernel log, and the pattern the operator's config may
 * replace ({"pattern": "..."}). */
static ns_subscriptions subscribe(void) {
    static char *pattern;
    static const char *patterns[2];
    static ns_stream kernel;
    ns_error e = {0};
    ns_json *cfg = ns_config(&e);
    if (!cfg) ns_log(NS_LOG_ERROR, "%s", e.message);
    ns_error_clear(&e);
    const char *p = cfg ? ns_json_get_str(cfg, "pattern") : NULL;
    free(pattern);
    pattern = ns_xstrdup(p ? p : "Killed process (\\d+) \\((.+?)\\)");
    ns_json_free(cfg);
    patterns[0] = pattern;
    kernel = (ns_stream){.name = "kernel", .source = NS_SOURCE_KMSG, .patterns = patterns};
    return (ns_subscriptions){.streams = &kernel, .streams_len = 1};
}

/* Within a second of a matching kernel message. */
static int on_lines(ns_node *node, const ns_lines *lines, ns_error *err) {
    if (set(node, err) != 0) return 1;
    for (size_t i = 0; i < lines->len; i++) {
        const char *text = lines->matches[i].text;
        ns_node_set_condition(node, "OOMKill", NS_TRUE, "OOMKill", text);
        ns_record_event(NS_EVENT_WARNING, "OOMKill", text);
    }
    return 0;
}

NODESTATUS_EXPORT_REACTOR(metadata, set, subscribe, on_lines);
