/*
 * Unit tests of memory-features, natively, on fixture files:
 *
 *   gcc -std=c11 -Wall -Wextra -Werror -DNODESTATUS_NATIVE -I../../../sdk/c \
 *       test_setter.c ../../../sdk/c/src/[a-z]*.c ../../../sdk/c/nodestatus_native.c -o test_setter
 *   ./test_setter fixtures
 *
 * fixtures/<case>/ holds proc/swaps and sys/devices/system/node/online as a
 * machine would have them; the setter reads them through its `root`.
 */
#include "setter.c"

#include "check.h"

static const char *fixtures = "fixtures";

/* Runs the setter over `node_json` with the fixture `name` as the machine.
 * Returns the node as the host has it after merging the setter's part
 * (malloc'd), or NULL with *msg set (malloc'd). */
static char *run_case(const char *name, const char *node_json, char **msg) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", fixtures, name);
    root = dir;
    ns_error err = {0};
    char *out = ns_native_apply(nodestatus_plugin_set, node_json, &err);
    *msg = err.message;
    root = "";
    return out;
}

static bool has_label(const char *json, const char *label, const char *value) {
    ns_node *n = ns_node_parse(json, strlen(json), NULL);
    const char *v = n ? ns_node_label(n, label) : NULL;
    bool ok = value ? v && strcmp(v, value) == 0 : v == NULL;
    ns_node_free(n);
    return ok;
}

static const char *EMPTY = "{\"metadata\":{\"name\":\"n\"},\"status\":{}}";
static const char *STALE =
    "{\"metadata\":{\"name\":\"n\",\"labels\":{\"" LABEL_NUMA "\":\"true\",\"" LABEL_SWAP "\":\"true\","
    "\"other\":\"kept\"}},\"status\":{}}";

static void test_parsers(void) {
    CHECK(count_nodes("0\n") == 1);
    CHECK(count_nodes("0-1\n") == 2);
    CHECK(count_nodes("0,2-3\n") == 3);
    CHECK(count_nodes("0-7,16-23") == 16);
    CHECK(count_nodes("1") == 1);
    CHECK(count_nodes("\n") == 0);
    CHECK(count_nodes("") == 0);
    CHECK(count_nodes("zero") == -1);
    CHECK(count_nodes("0-") == -1);
    CHECK(count_nodes("3-1") == -1);
    CHECK(count_nodes("0,,1") == -1);
    CHECK(count_nodes("-1") == -1);
    CHECK(count_nodes("0 1") == -1);

    CHECK(swap_present("Filename\tType\tSize\tUsed\tPriority\n") == 0);
    CHECK(swap_present("Filename\tType\tSize\tUsed\tPriority") == 0);
    CHECK(swap_present("Filename\tType\tSize\tUsed\tPriority\n\n  \n") == 0);
    CHECK(swap_present("Filename\tType\tSize\tUsed\tPriority\n/dev/sda2 partition 1 0 -2\n") == 1);
    CHECK(swap_present("") == -1);
    CHECK(swap_present("garbage\n/dev/sda2 partition 1 0 -2\n") == -1);
}

static void test_cases(void) {
    char *msg, *out;

    /* one node, no swap: nothing set, and stale labels go */
    out = run_case("single", EMPTY, &msg);
    CHECK(out && !msg);
    if (out) CHECK(strcmp(out, EMPTY) == 0);
    free(out);
    out = run_case("single", STALE, &msg);
    CHECK(out && has_label(out, LABEL_NUMA, NULL) && has_label(out, LABEL_SWAP, NULL) &&
          has_label(out, "other", "kept"));
    free(out);
    /* its part: its two labels, removed; nobody else's */
    const char *part = ns_native_last_part();
    CHECK(part && strstr(part, "\"" LABEL_NUMA "\":null") && strstr(part, "\"" LABEL_SWAP "\":null") &&
          !strstr(part, "other") && !strstr(part, "status"));

    /* two nodes and a swap partition */
    out = run_case("numa-swap", EMPTY, &msg);
    CHECK(out && has_label(out, LABEL_NUMA, "true") && has_label(out, LABEL_SWAP, "true"));
    /* a second pass over its own output changes nothing */
    if (out) {
        char *again = run_case("numa-swap", out, &msg);
        CHECK(again && strcmp(again, out) == 0);
        free(again);
    }
    free(out);

    /* sparse node list, swap file and zram */
    out = run_case("sparse", STALE, &msg);
    CHECK(out && has_label(out, LABEL_NUMA, "true") && has_label(out, LABEL_SWAP, "true"));
    free(out);

    /* NUMA dir missing: one node (logged at debug), swap still read */
    FILE *log = tmpfile();
    CHECK(log != NULL);
    ns_native_set_log(log);
    out = run_case("no-sys", STALE, &msg);
    ns_native_set_log(NULL);
    CHECK(out && has_label(out, LABEL_NUMA, NULL) && has_label(out, LABEL_SWAP, "true"));
    free(out);
    if (log) {
        char line[512] = "";
        rewind(log);
        CHECK(fgets(line, sizeof line, log) && strncmp(line, "DEBUG cannot read ", 18) == 0 &&
              strstr(line, "treating the machine as one NUMA node"));
        fclose(log);
    }

    /* /proc missing: an error that names the file and the grant */
    out = run_case("no-proc", EMPTY, &msg);
    CHECK(!out && msg && strstr(msg, "cannot read ") && strstr(msg, "/proc/swaps: ") &&
          strstr(msg, "grant the plugin /proc"));
    free(msg);

    out = run_case("bad-online", EMPTY, &msg);
    CHECK(!out && msg && strstr(msg, "is not a list of node numbers"));
    free(msg);

    out = run_case("bad-swaps", EMPTY, &msg);
    CHECK(!out && msg && strstr(msg, "header"));
    free(msg);

    /* a node that does not parse */
    out = run_case("single", "{\"metadata\":", &msg);
    CHECK(!out && msg && strstr(msg, "does not parse"));
    free(msg);
}

static void test_metadata(void) {
    ns_metadata m = nodestatus_plugin_metadata();
    CHECK(strcmp(m.name, "memory-features") == 0);
    CHECK(m.paths && strcmp(m.paths[0], "/proc") == 0 && strcmp(m.paths[1], NODE_DIR) == 0 && !m.paths[2]);
    CHECK(!m.env && !m.affects_readiness);
}

int main(int argc, char **argv) {
    if (argc > 1) fixtures = argv[1];
    test_parsers();
    test_cases();
    test_metadata();
    return check_summary("test_setter");
}
