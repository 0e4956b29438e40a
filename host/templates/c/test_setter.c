/*
 * Unit tests of {{name}}, natively (./build.sh runs them):
 *
 *   gcc -std=c11 -DNODESTATUS_NATIVE -I{{kit}}/sdk/c test_setter.c \
 *       {{kit}}/sdk/c/src/[a-z]*.c {{kit}}/sdk/c/nodestatus_native.c -o test_setter && ./test_setter
 */
#include "setter.c"

#include "check.h"

#include <stdlib.h>

int main(void) {
    char v[32];
    CHECK(major_minor("6.1.0-18-amd64", v, sizeof v) == 0);
    CHECK_STR(v, "6.1");
    CHECK(major_minor("linux", v, sizeof v) == -1);

    const char *node = "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n\"}}";
    ns_error err = {0};
    /* ns_run returns the setter's part: only the fields it sets. */
    char *part = ns_run(nodestatus_plugin_set, node, strlen(node), NULL, &err);
    CHECK(part != NULL);
    CHECK(part && strncmp(part, "{\"metadata\":{\"labels\":{\"" LABEL "\":", strlen(LABEL) + 26) == 0);
    free(part);
    /* ns_native_apply: the node as the engine has it after the merge. */
    char *out = ns_native_apply(nodestatus_plugin_set, node, &err);
    CHECK(out && strstr(out, "\"name\":\"n\"") && strstr(out, LABEL));
    free(out);
    free(err.message);

    return check_summary("test_setter");
}
