/*
 * oom-kill's native tests: a pass, then a line fed as the host would hand
 * it over, and the subscription with and without the config's pattern.
 */
#include "setter.c"

#include "check.h"

int main(void) {
    const char *node = "{\"metadata\":{\"name\":\"n1\"},\"status\":{}}";
    ns_error err = {0};
    size_t len = 0;
    char *part = ns_run(nodestatus_plugin_set, node, strlen(node), &len, &err);
    CHECK(part && strstr(part, "\"status\":\"False\"") && strstr(part, "\"reason\":\"NoOOMKill\""));
    free(part);

    const char *line = "Out of memory: Killed process 4242 (stress) total-vm:1000kB";
    ns_match m = {.stream = "kernel", .pattern = 0, .text = line, .time_ms = 1764400000000};
    ns_lines lines = {.matches = &m, .len = 1};
    part = ns_run_lines(nodestatus_plugin_on_lines, node, strlen(node), &lines, &len, &err);
    CHECK(part && strstr(part, "\"status\":\"True\"") && strstr(part, line));
    free(part);
    char *events = ns_native_take_events();
    CHECK_STR(events, "Warning OOMKill: Out of memory: Killed process 4242 (stress) total-vm:1000kB\n");
    free(events);

    ns_subscriptions s = nodestatus_plugin_subscribe();
    CHECK(s.streams_len == 1 && s.streams[0].source == NS_SOURCE_KMSG);
    CHECK_STR(s.streams[0].patterns[0], "Killed process (\\d+) \\((.+?)\\)");
    ns_native_set_config("{\"pattern\": \"blocked\"}");
    s = nodestatus_plugin_subscribe();
    CHECK_STR(s.streams[0].patterns[0], "blocked");
    ns_native_set_config(NULL);
    return check_summary("oom-kill");
}
