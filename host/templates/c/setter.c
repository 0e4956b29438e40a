/*
 * {{name}}: a nodestatus setter. It labels the node with its kernel's
 * major.minor version; change `set` to report what you need.
 *
 * Build, test and check it with `./build.sh`.
 */
#include "nodestatus.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define LABEL "{{name}}.nodestatus.io/kernel"

static ns_metadata metadata(void) {
    return (ns_metadata){
        .name = "{{name}}",
        .version = "0.1.0",
        .description = "labels the node with its kernel's major.minor version",
    };
}

/* The kernel's "major.minor" from a release such as "6.1.0-18-amd64" into
 * `out`; 0, or -1 when the release does not start with one. */
static int major_minor(const char *release, char *out, size_t size) {
    unsigned major, minor;
    int used = 0;
    if (!isdigit((unsigned char)release[0]) || sscanf(release, "%u.%u%n", &major, &minor, &used) != 2)
        return -1;
    snprintf(out, size, "%u.%u", major, minor);
    return 0;
}

static int set(ns_node *node, ns_error *err) {
    ns_system_info info;
    ns_system_info_get(&info);
    char version[32];
    int rc = major_minor(info.kernel_release, version, sizeof version);
    if (rc != 0) {
        rc = ns_error_set(err, "cannot read a version from the kernel release \"%s\"", info.kernel_release);
    } else {
        ns_node_set_label(node, LABEL, version);
    }
    ns_system_info_free(&info);
    return rc;
}

NODESTATUS_EXPORT(metadata, set);
