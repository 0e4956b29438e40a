/*
 * {{name}}: a nodestatus setter. It labels the node with its kernel's
 * major.minor version, read from a file; change `set` to report what you need.
 *
 * A setter reads only the directories it asks for in its metadata and the
 * operator grants (config.yaml holds the grant). Build, test and check it
 * with `./build.sh`.
 */
#include "nodestatus.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LABEL "{{name}}.nodestatus.io/kernel"
/* The file it reads, in the directory it asks for. */
#define RELEASE_FILE "{{grant}}/osrelease"

static ns_metadata metadata(void) {
    /* The directory of RELEASE_FILE; config.yaml grants it. */
    static const char *paths[] = {"{{grant}}", NULL};
    return (ns_metadata){
        .name = "{{name}}",
        .version = "0.1.0",
        .description = "labels the node with its kernel's major.minor version",
        .paths = paths,
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
    char *release = ns_read_file(RELEASE_FILE, 0, NULL);
    if (release == NULL)
        return ns_error_set(err, "%s: %s", RELEASE_FILE, strerror(errno));
    release[strcspn(release, "\n")] = '\0';
    char version[32];
    int rc = major_minor(release, version, sizeof version);
    if (rc != 0) {
        rc = ns_error_set(err, "cannot read a version from the kernel release \"%s\"", release);
    } else {
        ns_node_set_label(node, LABEL, version);
    }
    free(release);
    return rc;
}

NODESTATUS_EXPORT(metadata, set);
