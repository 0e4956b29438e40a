/*
 * memory-features: Node Feature Discovery-compatible memory labels, in C.
 *
 *   feature.node.kubernetes.io/memory-numa=true  more than one NUMA node online
 *                                                (/sys/devices/system/node/online)
 *   feature.node.kubernetes.io/memory-swap=true  a swap device is in use (/proc/swaps)
 *
 * A label whose feature is gone is removed, as NFD does: the plugin never
 * leaves a stale "true" behind and never writes "false".
 */
#include "nodestatus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LABEL_NUMA "feature.node.kubernetes.io/memory-numa"
#define LABEL_SWAP "feature.node.kubernetes.io/memory-swap"

#define NODE_DIR "/sys/devices/system/node"
#define NODE_ONLINE NODE_DIR "/online"
#define PROC_SWAPS "/proc/swaps"

/* Prefixed to every path; the unit tests point it at their fixtures. */
static const char *root = "";

static ns_metadata metadata(void) {
    static const char *const paths[] = {"/proc", NODE_DIR, NULL};
    return (ns_metadata){
        .name = "memory-features",
        .version = "0.1.0",
        .description = "NFD memory labels: memory-numa when several NUMA nodes are online, "
                       "memory-swap when swap is in use",
        .paths = paths,
    };
}

/* Counts the nodes in a kernel list such as "0", "0-3" or "0,2-3\n".
 * Returns -1 when the text is not such a list. */
static long count_nodes(const char *text) {
    long count = 0;
    const char *p = text;
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    if (*p == '\0') return 0; /* no node online: an empty list */
    for (;;) {
        char *end;
        errno = 0;
        unsigned long lo = strtoul(p, &end, 10), hi = lo;
        if (end == p || *p == '-' || *p == '+' || errno) return -1;
        p = end;
        if (*p == '-') {
            const char *q = ++p;
            hi = strtoul(q, &end, 10);
            if (end == q || *q == '-' || *q == '+' || errno || hi < lo) return -1;
            p = end;
        }
        count += (long)(hi - lo + 1);
        if (*p == ',') {
            p++;
            continue;
        }
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        return *p == '\0' ? count : -1;
    }
}

/* Whether /proc/swaps (a header line, then one line per active swap area)
 * lists a swap area. Returns -1 when the header is missing. */
static int swap_present(const char *text) {
    if (strncmp(text, "Filename", 8) != 0) return -1;
    const char *line = strchr(text, '\n');
    while (line) {
        line++;
        const char *q = line;
        while (*q == ' ' || *q == '\t') q++;
        if (*q != '\0' && *q != '\n') return 1;
        line = strchr(line, '\n');
    }
    return 0;
}

/* Sets the label to "true" when on, removes it when off. */
static void apply(ns_node *node, const char *label, bool on) {
    if (on)
        ns_node_set_label(node, label, "true");
    else
        ns_node_remove_label(node, label);
}

static char *read_under_root(const char *path, char *full, size_t full_size) {
    snprintf(full, full_size, "%s%s", root, path);
    return ns_read_file(full, 1 << 20, NULL);
}

static int set(ns_node *node, ns_error *err) {
    char path[4096];

    /* NUMA: an unreadable list (not granted, or no sysfs) counts as one node. */
    bool numa = false;
    char *online = read_under_root(NODE_ONLINE, path, sizeof path);
    if (!online) {
        ns_debug("cannot read %s (%s); treating the machine as one NUMA node", path, strerror(errno));
    } else {
        long nodes = count_nodes(online);
        free(online);
        if (nodes < 0) return ns_error_set(err, "%s is not a list of node numbers", path);
        numa = nodes > 1;
        ns_debug("%ld NUMA node(s) online", nodes);
    }

    /* Swap: /proc/swaps must be readable, or the answer would be a guess. */
    char *swaps = read_under_root(PROC_SWAPS, path, sizeof path);
    if (!swaps)
        return ns_error_set(err,
                            "cannot read %s: %s (grant the plugin /proc: plugins.memory-features.paths: "
                            "[/proc, " NODE_DIR "])",
                            path, strerror(errno));
    int swap = swap_present(swaps);
    free(swaps);
    if (swap < 0) return ns_error_set(err, "%s does not start with its \"Filename\" header", path);

    apply(node, LABEL_NUMA, numa);
    apply(node, LABEL_SWAP, swap == 1);
    return 0;
}

NODESTATUS_EXPORT(metadata, set);
