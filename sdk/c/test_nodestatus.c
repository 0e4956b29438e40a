/*
 * Unit tests of the C SDK, compiled natively:
 *
 *   gcc -std=c11 -Wall -Wextra -Werror -DNODESTATUS_NATIVE -fsanitize=address,undefined \
 *       test_nodestatus.c src/[a-z]*.c nodestatus_native.c -o test_nodestatus && ./test_nodestatus
 */
#include "nodestatus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Parses and serializes again; returns the malloc'd result or NULL. */
static char *roundtrip(const char *in) {
    ns_error err = {0};
    ns_json *v = ns_json_parse(in, strlen(in), &err);
    if (!v) {
        fprintf(stderr, "parse failed: %s\n", err.message);
        ns_error_clear(&err);
        return NULL;
    }
    char *out = ns_json_serialize(v, NULL);
    ns_json_free(v);
    return out;
}

static void check_roundtrip(const char *in, const char *want) {
    char *out = roundtrip(in);
    CHECK_STR(out, want);
    free(out);
}

static void check_bad(const char *in, size_t len, const char *want_in_message) {
    ns_error err = {0};
    ns_json *v = ns_json_parse(in, len, &err);
    checks++;
    if (v || !err.message || !strstr(err.message, want_in_message)) {
        failures++;
        fprintf(stderr, "bad JSON %.*s: got %s, message %s (want %s)\n", (int)len, in, v ? "a value" : "NULL",
                err.message ? err.message : "(none)", want_in_message);
    }
    ns_json_free(v);
    ns_error_clear(&err);
}

static void test_json_values(void) {
    check_roundtrip("{\"a\":1,\"b\":[true,false,null],\"c\":\"x\",\"d\":{},\"e\":[]}",
                    "{\"a\":1,\"b\":[true,false,null],\"c\":\"x\",\"d\":{},\"e\":[]}");
    /* whitespace goes, numbers keep their text */
    check_roundtrip(" { \"n\" : 1.50e+10 , \"big\":123456789012345678901234567890,\"z\":-0,\"f\":0.1E-7 }\n",
                    "{\"n\":1.50e+10,\"big\":123456789012345678901234567890,\"z\":-0,\"f\":0.1E-7}");
    check_roundtrip("\"\"", "\"\"");
    check_roundtrip("42", "42");
    check_roundtrip("null", "null");
    /* key order kept, as the input has it */
    check_roundtrip("{\"z\":1,\"a\":2,\"m\":3}", "{\"z\":1,\"a\":2,\"m\":3}");
    /* a duplicate key replaces the earlier value, in its place */
    check_roundtrip("{\"a\":1,\"b\":2,\"a\":3}", "{\"a\":3,\"b\":2}");

    ns_error err = {0};
    const char *src = "{\"i\":-9223372036854775808,\"u\":18446744073709551615,\"f\":1.5,\"e\":1e3,\"o\":18446744073709551616}";
    ns_json *v = ns_json_parse(src, strlen(src), &err);
    CHECK(v);
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    CHECK(ns_json_int64(ns_json_get(v, "i"), &i) && i == INT64_MIN);
    CHECK(ns_json_uint64(ns_json_get(v, "u"), &u) && u == UINT64_MAX);
    CHECK(!ns_json_int64(ns_json_get(v, "u"), &i));
    CHECK(!ns_json_uint64(ns_json_get(v, "i"), &u));
    CHECK(!ns_json_int64(ns_json_get(v, "f"), &i));
    CHECK(!ns_json_int64(ns_json_get(v, "e"), &i));
    CHECK(!ns_json_uint64(ns_json_get(v, "o"), &u));
    CHECK(ns_json_double(ns_json_get(v, "f"), &d) && d == 1.5);
    CHECK(ns_json_double(ns_json_get(v, "e"), &d) && d == 1000.0);
    CHECK_STR(ns_json_num_text(ns_json_get(v, "e")), "1e3");
    CHECK(ns_json_get(v, "missing") == NULL);
    CHECK(ns_json_get(ns_json_get(v, "i"), "x") == NULL);
    ns_json_free(v);

    /* building */
    ns_json *o = ns_json_object();
    ns_json_set(o, "b", ns_json_int(-5));
    ns_json_set(o, "a", ns_json_uint(7));
    ns_json *arr = ns_json_set(o, "list", ns_json_array());
    ns_json_push(arr, ns_json_string("x"));
    ns_json_push(arr, ns_json_bool(true));
    ns_json_push(arr, ns_json_null());
    ns_json_push(arr, ns_json_number_text("2.5e-3"));
    CHECK(ns_json_number_text("01") == NULL);
    CHECK(ns_json_number_text("1.") == NULL);
    CHECK(ns_json_number_text("NaN") == NULL);
    ns_json_set(o, "b", ns_json_string("replaced"));
    char *s = ns_json_serialize(o, NULL);
    CHECK_STR(s, "{\"b\":\"replaced\",\"a\":7,\"list\":[\"x\",true,null,2.5e-3]}");
    free(s);
    ns_json *c = ns_json_clone(o);
    CHECK(ns_json_equal(o, c));
    CHECK(ns_json_remove_at(ns_json_get(c, "list"), 1));
    CHECK(!ns_json_remove_at(ns_json_get(c, "list"), 9));
    CHECK(!ns_json_equal(o, c));
    CHECK(ns_json_remove(o, "b"));
    CHECK(!ns_json_remove(o, "b"));
    CHECK_STR(ns_json_key_at(o, 0), "a");
    CHECK(ns_json_len(o) == 2);
    CHECK(ns_json_len(ns_json_get(c, "list")) == 3);
    CHECK_STR(ns_json_str(ns_json_path(c, "list", NULL) ? ns_json_at(ns_json_get(c, "list"), 0) : NULL), "x");
    ns_json_free(o);
    ns_json_free(c);

    /* object equality ignores member order; numbers compare by text */
    ns_json *a1 = ns_json_parse("{\"x\":1,\"y\":[1,2]}", 17, NULL);
    ns_json *a2 = ns_json_parse("{\"y\":[1,2],\"x\":1}", 17, NULL);
    ns_json *a3 = ns_json_parse("{\"y\":[2,1],\"x\":1}", 17, NULL);
    CHECK(a1 && a2 && a3);
    CHECK(ns_json_equal(a1, a2));
    CHECK(!ns_json_equal(a1, a3));
    ns_json_free(a1);
    ns_json_free(a2);
    ns_json_free(a3);
}

static void test_json_strings(void) {
    /* escapes decode, and serialize back in the shortest form */
    const char *in = "\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u0001 \\u001f \\u00e9 \\u65e5 \\ud83d\\ude00 \\u007f\"";
    ns_error err = {0};
    ns_json *v = ns_json_parse(in, strlen(in), &err);
    CHECK(v);
    CHECK_STR(ns_json_str(v), "q\" b\\ s/ \b\f\n\r\t \x01 \x1f \xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80 \x7f");
    char *out = ns_json_serialize(v, NULL);
    CHECK_STR(out, "\"q\\\" b\\\\ s/ \\b\\f\\n\\r\\t \\u0001 \\u001f \xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80 \x7f\"");
    free(out);
    ns_json_free(v);

    /* UTF-8 passes through byte for byte, in keys too */
    check_roundtrip("{\"h\xc3\xa9llo\":\"\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 \xef\xbf\xbf \xf4\x8f\xbf\xbf\"}",
                    "{\"h\xc3\xa9llo\":\"\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 \xef\xbf\xbf \xf4\x8f\xbf\xbf\"}");
    /* uppercase hex, and key escapes */
    check_roundtrip("{\"a\\u00C9\\n\":\"\\u00E9\"}", "{\"a\xc3\x89\\n\":\"\xc3\xa9\"}");

    /* NUL inside a string */
    v = ns_json_parse("\"a\\u0000b\"", 10, &err);
    CHECK(v && ns_json_str_len(v) == 3 && memcmp(ns_json_str(v), "a\0b", 3) == 0);
    out = ns_json_serialize(v, NULL);
    CHECK_STR(out, "\"a\\u0000b\"");
    free(out);
    ns_json_free(v);

    /* a program's invalid UTF-8 comes out as U+FFFD, valid bytes untouched */
    v = ns_json_string("ok \xff \xc3\xa9 \xc0\xaf \xed\xa0\x80 \xe6\x97");
    out = ns_json_serialize(v, NULL);
    CHECK_STR(out, "\"ok \xef\xbf\xbd \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
                   "\xef\xbf\xbd\xef\xbf\xbd\"");
    free(out);
    ns_json_free(v);

    /* what the glue does to every string it hands the host */
    size_t n = 0;
    char *clean = ns_utf8_sanitize("a\xff\xc3\xa9\0z\xf0\x9f", 8, &n);
    CHECK(n == 14 && memcmp(clean, "a\xef\xbf\xbd\xc3\xa9\0z\xef\xbf\xbd\xef\xbf\xbd", 14) == 0);
    free(clean);
    clean = ns_utf8_sanitize("", 0, &n);
    CHECK(n == 0 && clean && clean[0] == '\0');
    free(clean);
}

static void test_json_malformed(void) {
    check_bad("", 0, "unexpected end of input at line 1 column 1");
    check_bad("   ", 3, "unexpected end of input");
    check_bad("{", 1, "expected a string key");
    check_bad("[1,]", 4, "expected a value at line 1 column 4");
    check_bad("[1 2]", 5, "expected ',' or ']'");
    check_bad("{\"a\":}", 6, "expected a value");
    check_bad("{\"a\" 1}", 7, "expected ':'");
    check_bad("{\"a\":1,}", 8, "expected a string key");
    check_bad("{\"a\":1 \"b\":2}", 13, "expected ',' or '}'");
    check_bad("{'a':1}", 7, "expected a string key");
    check_bad("{1:1}", 5, "expected a string key");
    check_bad("01", 2, "trailing characters");
    check_bad("1.", 2, "expected a value");
    check_bad(".5", 2, "expected a value");
    check_bad("-", 1, "expected a value");
    check_bad("1e", 2, "expected a value");
    check_bad("+1", 2, "expected a value");
    check_bad("NaN", 3, "expected a value");
    check_bad("Infinity", 8, "expected a value");
    check_bad("tru", 3, "expected a value");
    check_bad("nul", 3, "expected a value");
    check_bad("[true false]", 12, "expected ',' or ']'");
    check_bad("\"abc", 4, "unterminated string");
    check_bad("\"abc\\", 5, "unterminated string");
    check_bad("\"\\x\"", 4, "invalid escape");
    check_bad("\"\\u12\"", 6, "invalid \\u escape");
    check_bad("\"\\u12g4\"", 8, "invalid \\u escape");
    check_bad("\"\\ud800\"", 8, "lone leading surrogate");
    check_bad("\"\\ud800\\u0041\"", 14, "lone leading surrogate");
    check_bad("\"\\udc00\"", 8, "lone trailing surrogate");
    check_bad("\"a\nb\"", 5, "control character in string");
    check_bad("\"a\tb\"", 5, "control character in string");
    check_bad("\"\xff\"", 3, "invalid UTF-8");
    check_bad("\"\xc0\xaf\"", 4, "invalid UTF-8");        /* overlong */
    check_bad("\"\xed\xa0\x80\"", 5, "invalid UTF-8");    /* surrogate */
    check_bad("\"\xf4\x90\x80\x80\"", 6, "invalid UTF-8"); /* > U+10FFFF */
    check_bad("\"\xe6\x97\"", 4, "invalid UTF-8");        /* truncated */
    check_bad("{} x", 4, "trailing characters at line 1 column 4");
    check_bad("{}{}", 4, "trailing characters");
    check_bad("{\n  \"a\": tx\n}", 13, "expected a value at line 2 column 8");
    check_bad("[1]\0", 4, "trailing characters");

    /* nesting: 128 levels parse, 129 do not (and nothing overflows) */
    char deep[1024];
    for (int n = 128; n <= 129; n++) {
        memset(deep, '[', (size_t)n);
        memset(deep + n, ']', (size_t)n);
        ns_error err = {0};
        ns_json *v = ns_json_parse(deep, (size_t)n * 2, &err);
        CHECK(n == 128 ? v != NULL : v == NULL);
        if (n == 129) CHECK(err.message && strstr(err.message, "nesting too deep"));
        ns_json_free(v);
        ns_error_clear(&err);
    }
    memset(deep, '[', 1000);
    CHECK(ns_json_parse(deep, 1000, NULL) == NULL); /* a NULL err is fine */

    /* NULL err is fine */
    CHECK(ns_json_parse("{", 1, NULL) == NULL);
}

static const char *SAMPLE =
    "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"labels\":{\"a\":\"1\"}},"
    "\"spec\":{\"taints\":[]},\"status\":{\"images\":[{\"names\":[\"x\"],\"sizeBytes\":1}],"
    "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"2020-01-01T00:00:00Z\","
    "\"lastTransitionTime\":\"2020-01-01T00:00:00Z\",\"reason\":\"r\",\"message\":\"m\"}]}}";

static ns_node *sample(void) {
    ns_error err = {0};
    ns_node *n = ns_node_parse(SAMPLE, strlen(SAMPLE), &err);
    if (!n) {
        fprintf(stderr, "sample: %s\n", err.message);
        abort();
    }
    return n;
}

static void test_node_roundtrip(void) {
    ns_node *n = sample();
    char *out = ns_node_to_json(n, NULL);
    CHECK_STR(out, SAMPLE);
    free(out);
    ns_node_free(n);

    const char *weird = "{\"metadata\":{\"name\":\"a\\\"b\",\"x\":[1,2.50]},\"status\":{},\"extra\":{\"k\":\"v\"}}";
    ns_error err = {0};
    n = ns_node_parse(weird, strlen(weird), &err);
    CHECK(n);
    CHECK_STR(ns_node_name(n), "a\"b");
    out = ns_node_to_json(n, NULL);
    CHECK_STR(out, weird);
    free(out);
    ns_node_free(n);

    const char *bad[] = {"[1]", "{\"metadata\": 3}", "{\"status\": null}", "{} trailing", "", "\"node\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ns_node *b = ns_node_parse(bad[i], strlen(bad[i]), &err);
        CHECK(b == NULL && err.message != NULL);
        ns_node_free(b);
        ns_error_clear(&err);
    }

    n = ns_node_named("worker-1");
    out = ns_node_to_json(n, NULL);
    CHECK_STR(out, "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"worker-1\"},\"status\":{}}");
    free(out);
    ns_node_free(n);

    /* no metadata at all: name is "", a label creates metadata.labels */
    n = ns_node_parse("{}", 2, &err);
    CHECK(n);
    CHECK_STR(ns_node_name(n), "");
    CHECK(ns_node_label(n, "x") == NULL);
    CHECK(!ns_node_remove_label(n, "x"));
    ns_node_set_label(n, "x", "y");
    out = ns_node_to_json(n, NULL);
    CHECK_STR(out, "{\"metadata\":{\"labels\":{\"x\":\"y\"}}}");
    free(out);
    ns_node_free(n);
}

static void test_node_edits(void) {
    ns_node *n = sample();
    ns_node_set_label(n, "example.com/x", "y");
    ns_node_set_capacity(n, "example.com/dongle", ns_quantity_units(2));
    ns_node_set_info(n, "kernelVersion", "6.1");
    ns_node_set_annotation(n, "example.com/note", "line\nbreak \"quoted\"");
    CHECK_STR(ns_node_label(n, "a"), "1");
    CHECK_STR(ns_node_label(n, "example.com/x"), "y");
    CHECK_STR(ns_node_info(n, "kernelVersion"), "6.1");
    CHECK_STR(ns_node_annotation(n, "example.com/note"), "line\nbreak \"quoted\"");
    ns_quantity q;
    CHECK(ns_node_capacity(n, "example.com/dongle", &q) && q.units == 2 && q.millis == 0);
    CHECK(!ns_node_allocatable(n, "example.com/dongle", &q));
    ns_node_set_allocatable(n, "memory", ns_quantity_bytes(16ull << 30));
    CHECK_STR(ns_json_get_str(ns_node_status(n, "allocatable"), "memory"), "16Gi");
    char *out = ns_node_to_json(n, NULL);
    CHECK_STR(out,
              "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"labels\":{\"a\":\"1\","
              "\"example.com/x\":\"y\"},\"annotations\":{\"example.com/note\":\"line\\nbreak \\\"quoted\\\"\"}},"
              "\"spec\":{\"taints\":[]},\"status\":{\"images\":[{\"names\":[\"x\"],\"sizeBytes\":1}],"
              "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"2020-01-01T00:00:00Z\","
              "\"lastTransitionTime\":\"2020-01-01T00:00:00Z\",\"reason\":\"r\",\"message\":\"m\"}],"
              "\"capacity\":{\"example.com/dongle\":\"2\"},\"nodeInfo\":{\"kernelVersion\":\"6.1\"},"
              "\"allocatable\":{\"memory\":\"16Gi\"}}}");
    free(out);

    CHECK(ns_node_remove_label(n, "a"));
    CHECK(!ns_node_remove_label(n, "a"));
    CHECK(ns_node_remove_annotation(n, "example.com/note"));
    ns_node_remove_resource(n, "example.com/dongle");
    ns_node_remove_resource(n, "memory");
    CHECK(!ns_node_capacity(n, "example.com/dongle", &q));
    CHECK(ns_json_len(ns_node_status(n, "capacity")) == 0);

    /* set_status: replaced unless equal; removable */
    ns_address addrs[] = {{"InternalIP", "10.0.0.4"}, {"Hostname", "n1"}};
    ns_node_set_addresses(n, addrs, 2);
    ns_json *before = ns_node_status(n, "addresses");
    ns_node_set_addresses(n, addrs, 2);
    CHECK(ns_node_status(n, "addresses") == before); /* equal: untouched */
    CHECK_STR(ns_json_get_str(ns_json_at(ns_node_status(n, "addresses"), 1), "address"), "n1");
    CHECK(ns_node_remove_status(n, "addresses"));
    CHECK(!ns_node_remove_status(n, "addresses"));
    ns_node_free(n);

    /* a labels field that is not an object is replaced by one */
    const char *odd = "{\"metadata\":{\"name\":\"n\",\"labels\":null,\"annotations\":[1]},\"status\":{\"capacity\":\"x\"}}";
    n = ns_node_parse(odd, strlen(odd), NULL);
    CHECK(n);
    CHECK(ns_node_label(n, "k") == NULL);
    CHECK(ns_node_annotation(n, "k") == NULL);
    ns_node_set_label(n, "k", "v");
    ns_node_set_annotation(n, "k", "v");
    ns_node_set_capacity(n, "cpu", ns_quantity_from_millis(1500));
    out = ns_node_to_json(n, NULL);
    CHECK_STR(out, "{\"metadata\":{\"name\":\"n\",\"labels\":{\"k\":\"v\"},\"annotations\":{\"k\":\"v\"}},"
                   "\"status\":{\"capacity\":{\"cpu\":\"1500m\"}}}");
    free(out);
    ns_node_free(n);
}

static void test_conditions(void) {
    ns_node *n = sample();
    ns_transition t = ns_node_set_condition_at(n, "Ready", NS_TRUE, "r2", "m2", "2021-01-01T00:00:00Z");
    CHECK(!t.flipped && t.previous == NS_TRUE && t.current == NS_TRUE);
    ns_condition c;
    CHECK(ns_node_condition(n, "Ready", &c));
    CHECK_STR(c.last_heartbeat_time, "2021-01-01T00:00:00Z");
    CHECK_STR(c.last_transition_time, "2020-01-01T00:00:00Z");
    CHECK_STR(c.reason, "r2");
    CHECK_STR(c.message, "m2");

    t = ns_node_set_condition_at(n, "Ready", NS_FALSE, "r3", "m3", "2022-01-01T00:00:00Z");
    CHECK(t.flipped && t.previous == NS_TRUE && t.current == NS_FALSE);
    CHECK(ns_node_condition(n, "Ready", &c));
    CHECK_STR(c.status, "False");
    CHECK_STR(c.last_transition_time, "2022-01-01T00:00:00Z");

    /* a new condition is appended, flipped from nothing */
    t = ns_node_set_condition_at(n, "Custom", NS_UNKNOWN, "", "", "2022-01-01T00:00:00Z");
    CHECK(t.flipped && t.previous == NS_NONE);
    ns_json *list = ns_node_status(n, "conditions");
    CHECK(ns_json_len(list) == 2);
    CHECK_STR(ns_json_get_str(ns_json_at(list, 0), "type"), "Ready");
    CHECK_STR(ns_json_get_str(ns_json_at(list, 1), "type"), "Custom");
    char *s = ns_json_serialize(ns_json_at(list, 1), NULL);
    CHECK_STR(s, "{\"type\":\"Custom\",\"status\":\"Unknown\",\"lastHeartbeatTime\":\"2022-01-01T00:00:00Z\","
                 "\"lastTransitionTime\":\"2022-01-01T00:00:00Z\",\"reason\":\"\",\"message\":\"\"}");
    free(s);

    /* reason and message may come from the condition being replaced */
    CHECK(ns_node_condition(n, "Ready", &c));
    t = ns_node_set_condition_at(n, "Ready", NS_FALSE, c.reason, c.message, "2023-01-01T00:00:00Z");
    CHECK(!t.flipped);
    CHECK(ns_node_condition(n, "Ready", &c));
    CHECK_STR(c.reason, "r3");
    CHECK_STR(c.last_transition_time, "2022-01-01T00:00:00Z");

    CHECK(ns_node_remove_condition(n, "Custom"));
    CHECK(!ns_node_condition(n, "Custom", &c));
    CHECK(!ns_node_remove_condition(n, "Custom"));
    ns_node_free(n);

    /* no status at all; the real clock */
    n = ns_node_parse("{\"metadata\":{\"name\":\"x\"}}", 25, NULL);
    CHECK(n);
    t = ns_node_set_condition(n, "Fresh", NS_TRUE, "Because", "yes");
    CHECK(t.flipped && t.previous == NS_NONE);
    CHECK(ns_node_condition(n, "Fresh", &c));
    CHECK(c.last_heartbeat_time && strlen(c.last_heartbeat_time) == 20 && c.last_heartbeat_time[19] == 'Z');
    CHECK_STR(c.last_transition_time, c.last_heartbeat_time);
    ns_node_free(n);

    CHECK_STR(ns_status_str(NS_UNKNOWN), "Unknown");
    CHECK(ns_status_parse("True") == NS_TRUE && ns_status_parse("true") == NS_NONE);
    CHECK(ns_status_from_bool(false) == NS_FALSE);
}

static void check_qty(const char *in, int64_t units, int32_t millis, const char *formatted) {
    ns_quantity q;
    ns_error err = {0};
    char buf[NS_QUANTITY_MAX];
    bool ok = ns_quantity_parse(in, &q, &err);
    checks++;
    if (!ok || q.units != units || q.millis != millis || strcmp(ns_quantity_format_to(q, buf), formatted) != 0) {
        failures++;
        fprintf(stderr, "quantity %s: ok=%d units=%lld millis=%d formatted=%s (%s)\n", in, ok, (long long)q.units,
                q.millis, ok ? ns_quantity_format_to(q, buf) : "", err.message ? err.message : "");
    }
    ns_error_clear(&err);
}

static void test_quantities(void) {
    check_qty("2", 2, 0, "2");
    check_qty("1500m", 1, 500, "1500m");
    check_qty("100Mi", 100ll << 20, 0, "100Mi");
    check_qty("1.5G", 1500000000, 0, "1500M");
    check_qty("1e3", 1000, 0, "1k");
    check_qty("1E3", 1000, 0, "1k");
    check_qty("1e-3", 0, 1, "1m");
    check_qty("0.0001", 0, 1, "1m"); /* sub-milli rounds up */
    check_qty("-0.0001", -1, 999, "-1m");
    check_qty("-1", -1, 0, "-1");
    check_qty("-1.5", -2, 500, "-1500m");
    check_qty("+3", 3, 0, "3");
    check_qty(" 4Ki ", 4096, 0, "4Ki");
    check_qty("1Ki", 1024, 0, "1Ki");
    check_qty("1536Ki", 1536 * 1024, 0, "1536Ki");
    check_qty("1.5Gi", 1536ll << 20, 0, "1536Mi");
    check_qty("0.5Ki", 512, 0, "512");
    check_qty("0.001Ki", 1, 24, "1024m");
    check_qty("1Ei", 1ll << 60, 0, "1Ei");
    check_qty("7Ei", 7ll << 60, 0, "7Ei");
    check_qty("1.5Ei", 3ll << 59, 0, "1536Pi");
    check_qty("9E", 9000000000000000000ll, 0, "9E");
    check_qty("5n", 0, 1, "1m");
    check_qty("5u", 0, 1, "1m");
    check_qty("0", 0, 0, "0");
    check_qty("0Gi", 0, 0, "0");
    check_qty("000012", 12, 0, "12");
    check_qty(".5", 0, 500, "500m");
    check_qty("5.", 5, 0, "5");
    check_qty("12345678901234.567", 12345678901234ll, 567, "12345678901234567m");
    check_qty("9223372036854775807", INT64_MAX, 0, "9223372036854775807");
    check_qty("-9223372036854775808", INT64_MIN, 0, "-9223372036854775808");
    const char *bad[] = {"", "x", "1X", "1.2.3", "--1", "Mi", ".", "1Kii", "1 Ki", "1e", "1e+", "1ki",
                         "8Ei", "10E", "9223372036854775808", "1e9999", "-", "+", "1..2", "0x10",
                         "11111111111111111111111111111111111111111111111111111111111111111"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ns_quantity q;
        ns_error err = {0};
        bool ok = ns_quantity_parse(bad[i], &q, &err);
        checks++;
        if (ok || !err.message) {
            failures++;
            fprintf(stderr, "quantity \"%s\" parsed\n", bad[i]);
        }
        ns_error_clear(&err);
    }
    ns_error err = {0};
    ns_quantity q;
    CHECK(!ns_quantity_parse("1X", &q, &err));
    CHECK_STR(err.message, "\"1X\" is not a quantity (for example 2, 500m, 16Gi, 1.5G)");
    ns_error_clear(&err);

    char buf[NS_QUANTITY_MAX];
    CHECK_STR(ns_quantity_format_to(ns_quantity_bytes(16ull << 30), buf), "16Gi");
    CHECK_STR(ns_quantity_format_to(ns_quantity_bytes(32876232ull * 1024), buf), "32876232Ki");
    CHECK_STR(ns_quantity_format_to(ns_quantity_bytes(1000), buf), "1k"); /* under 1Ki: decimal, as Kubernetes */
    CHECK_STR(ns_quantity_format_to(ns_quantity_bytes(0), buf), "0");
    CHECK_STR(ns_quantity_format_to(ns_quantity_units(110), buf), "110");
    CHECK_STR(ns_quantity_format_to(ns_quantity_units(2000), buf), "2k");
    CHECK_STR(ns_quantity_format_to(ns_quantity_units(-2000), buf), "-2k");
    CHECK_STR(ns_quantity_format_to(ns_quantity_from_millis(1500), buf), "1500m");
    CHECK_STR(ns_quantity_format_to(ns_quantity_from_millis(-1500), buf), "-1500m");
    CHECK_STR(ns_quantity_format_to(ns_quantity_from_millis(-2000), buf), "-2");
    CHECK_STR(ns_quantity_format_to(ns_quantity_from_millis(7), buf), "7m");
    CHECK_STR(ns_quantity_format_to(ns_quantity_bytes(UINT64_MAX), buf), "9223372036854775807");
    CHECK_STR(ns_quantity_format_to((ns_quantity){INT64_MIN, 1, NS_DECIMAL_SI}, buf), "-9223372036854775807999m");

    /* round-trips */
    const char *rt[] = {"100Mi", "1500m", "16Gi", "2k", "7", "-1500m", "1Ei", "999m", "123456789123m"};
    for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++) {
        ns_quantity a, b;
        CHECK(ns_quantity_parse(rt[i], &a, NULL));
        CHECK(ns_quantity_parse(ns_quantity_format_to(a, buf), &b, NULL));
        CHECK(ns_quantity_cmp(a, b) == 0);
        CHECK_STR(buf, rt[i]);
    }

    /* arithmetic */
    ns_quantity cap = ns_quantity_bytes(1ull << 30), r;
    CHECK(ns_quantity_parse("2Gi", &r, NULL));
    CHECK(ns_quantity_as_millis(ns_quantity_sub_floor0(cap, r)) == 0);
    CHECK(ns_quantity_parse("512Mi", &r, NULL));
    CHECK_STR(ns_quantity_format_to(ns_quantity_sub_floor0(cap, r), buf), "512Mi");
    CHECK_STR(ns_quantity_format_to(ns_quantity_add(ns_quantity_from_millis(700), ns_quantity_from_millis(800)), buf),
              "1500m");
    CHECK_STR(ns_quantity_format_to(ns_quantity_sub_floor0(ns_quantity_units(2), ns_quantity_from_millis(300)), buf),
              "1700m");
    CHECK(ns_quantity_add(ns_quantity_units(INT64_MAX), ns_quantity_units(1)).units == INT64_MAX);
    CHECK(ns_quantity_cmp(ns_quantity_from_millis(-1), ns_quantity_units(0)) < 0);
    CHECK(ns_quantity_cmp(ns_quantity_from_millis(1001), ns_quantity_units(1)) > 0);
    CHECK(ns_quantity_units_ceil(ns_quantity_from_millis(1001)) == 2);
    CHECK(ns_quantity_units_ceil(ns_quantity_from_millis(-1001)) == -1);
    CHECK(ns_quantity_as_millis(ns_quantity_from_millis(-1001)) == -1001);
    CHECK(ns_quantity_as_millis(ns_quantity_units(INT64_MAX)) == INT64_MAX);
}

static void test_time(void) {
    char buf[NS_TIME_MAX];
    CHECK_STR(ns_rfc3339(0, buf), "1970-01-01T00:00:00Z");
    CHECK_STR(ns_rfc3339(1767225600, buf), "2026-01-01T00:00:00Z");
    CHECK_STR(ns_rfc3339(951782400, buf), "2000-02-29T00:00:00Z");
    CHECK_STR(ns_rfc3339(1795341600, buf), "2026-11-22T10:00:00Z");
    CHECK_STR(ns_rfc3339(-1, buf), "1969-12-31T23:59:59Z");
    CHECK(strlen(ns_now(buf)) == 20);
}

static int set_ok(ns_node *node, ns_error *err) {
    (void)err;
    ns_node_set_label(node, "example.com/ran", "yes");
    return 0;
}

static int set_fails(ns_node *node, ns_error *err) {
    ns_node_set_label(node, "example.com/ran", "yes");
    return ns_error_set(err, "cannot read %s: %s", "/x", "No such file");
}

static int set_fails_silently(ns_node *node, ns_error *err) {
    (void)node;
    (void)err;
    return 1;
}

static void test_run(void) {
    ns_error err = {0};
    size_t len = 0;
    char *out = ns_run(set_ok, "{\"metadata\":{\"name\":\"n\"}}", 25, &len, &err);
    /* The part: only what the setter wrote. */
    CHECK_STR(out, "{\"metadata\":{\"labels\":{\"example.com/ran\":\"yes\"}}}");
    CHECK(out && len == strlen(out));
    CHECK(err.message == NULL);
    free(out);
    /* The node as the host has it after the merge. */
    out = ns_native_apply(set_ok, "{\"metadata\":{\"name\":\"n\",\"labels\":{\"a\":\"1\"}}}", &err);
    CHECK_STR(out, "{\"metadata\":{\"name\":\"n\",\"labels\":{\"a\":\"1\",\"example.com/ran\":\"yes\"}}}");
    CHECK_STR(ns_native_last_part(), "{\"metadata\":{\"labels\":{\"example.com/ran\":\"yes\"}}}");
    free(out);

    out = ns_run(set_fails, "{}", 2, &len, &err);
    CHECK(out == NULL);
    CHECK_STR(err.message, "cannot read /x: No such file");
    ns_error_clear(&err);

    out = ns_run(set_fails_silently, "{}", 2, &len, &err);
    CHECK(out == NULL);
    CHECK_STR(err.message, "setter failed");
    ns_error_clear(&err);

    out = ns_run(set_ok, "{\"metadata\":", 12, &len, &err);
    CHECK(out == NULL);
    CHECK_STR(err.message, "the host sent a node that does not parse: invalid JSON: unexpected end of input at line 1 column 13");
    ns_error_clear(&err);

    /* host stand-ins */
    ns_native_set_config("{\"minKernel\":\"5.15\"}");
    ns_json *cfg = ns_config(&err);
    CHECK_STR(ns_json_get_str(cfg, "minKernel"), "5.15");
    ns_json_free(cfg);
    ns_native_set_config("{oops");
    CHECK(ns_config(&err) == NULL);
    CHECK(err.message && strncmp(err.message, "invalid plugin config: ", 23) == 0);
    ns_error_clear(&err);
    ns_native_set_config(NULL);
    char *raw = ns_config_json();
    CHECK_STR(raw, "{}");
    free(raw);
    const char *problems[] = {"plugin x is failing", NULL};
    ns_native_set_problems(problems);
    char **list;
    size_t np = ns_node_problems(&list);
    CHECK(np == 1);
    if (np == 1) CHECK_STR(list[0], "plugin x is failing");
    ns_strings_free(list, np);
    ns_native_set_problems(NULL);
    ns_log(NS_LOG_INFO, "not written %d", 1);
    ns_system_info info;
    ns_system_info_get(&info);
    CHECK(info.kernel_release != NULL);
    ns_system_info_free(&info);
    ns_fs_stats st;
    CHECK(ns_statvfs("/", &st, &err) == -1 && err.message);
    ns_error_clear(&err);
}

/* A reactor's on_lines: a condition from the last match, an event for each. */
static int on_xid(ns_node *node, const ns_lines *lines, ns_error *err) {
    if (lines->dropped) {
        ns_error_set(err, "%llu lines were dropped", (unsigned long long)lines->dropped);
        return 1;
    }
    for (size_t i = 0; i < lines->len; i++) {
        ns_node_set_condition_at(node, "GPUHealthy", NS_FALSE, "Xid", lines->matches[i].text,
                                 "2026-01-01T00:00:00Z");
        ns_record_event(NS_EVENT_WARNING, "GPUXid", lines->matches[i].text);
    }
    return 0;
}

static void test_run_lines(void) {
    ns_match m[] = {
        {.stream = "kernel", .pattern = 0, .text = "NVRM: Xid (PCI:0000:17:00): 79", .time_ms = 1},
        {.stream = "kernel", .pattern = 0, .text = "NVRM: Xid (PCI:0000:17:00): 48", .time_ms = 2},
    };
    ns_lines lines = {.matches = m, .len = 2};
    ns_error err = {0};
    size_t len = 0;
    char *out = ns_run_lines(on_xid, "{\"metadata\":{\"name\":\"n\"}}", 25, &lines, &len, &err);
    CHECK_STR(out, "{\"status\":{\"conditions\":[{\"type\":\"GPUHealthy\",\"status\":\"False\","
                   "\"lastHeartbeatTime\":\"2026-01-01T00:00:00Z\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\","
                   "\"reason\":\"Xid\",\"message\":\"NVRM: Xid (PCI:0000:17:00): 48\"}]}}");
    CHECK(out && len == strlen(out));
    free(out);
    char *events = ns_native_take_events();
    CHECK_STR(events, "Warning GPUXid: NVRM: Xid (PCI:0000:17:00): 79\nWarning GPUXid: NVRM: Xid (PCI:0000:17:00): 48\n");
    free(events);
    events = ns_native_take_events();
    CHECK_STR(events, "");
    free(events);
    /* No lines (NULL too): nothing written, an empty part. */
    out = ns_run_lines(on_xid, "{}", 2, NULL, &len, &err);
    CHECK_STR(out, "{}");
    free(out);
    /* The plugin's error, and a node that does not parse. */
    lines.dropped = 3;
    CHECK(ns_run_lines(on_xid, "{}", 2, &lines, &len, &err) == NULL);
    CHECK_STR(err.message, "3 lines were dropped");
    ns_error_clear(&err);
    CHECK(ns_run_lines(on_xid, "[", 1, &lines, &len, &err) == NULL);
    CHECK(err.message && strncmp(err.message, "the host sent a node that does not parse", 40) == 0);
    ns_error_clear(&err);
}

static void check_part(ns_node *n, const char *want) {
    char *got = ns_node_part_json(n, NULL);
    CHECK_STR(got, want);
    free(got);
}

static int set_reads_root(ns_node *node, ns_error *err) {
    (void)err;
    const char *a = ns_json_get_str(ns_json_path(ns_node_root(node), "metadata", "labels", NULL), "a");
    ns_node_set_label(node, "k", a ? a : "none");
    ns_node_set_label(node, "after", "raw");
    return 0;
}

static int set_changes_root(ns_node *node, ns_error *err) {
    (void)err;
    ns_json_set(ns_json_get(ns_node_root(node), "metadata"), "generateName", ns_json_string("x"));
    return 0;
}

static int set_changes_status(ns_node *node, ns_error *err) {
    (void)err;
    ns_json *c = ns_json_at(ns_node_status(node, "conditions"), 0);
    ns_json_set(c, "status", ns_json_string("False"));
    return 0;
}

static void test_part(void) {
    /* A keyed section changed in place is claimed whole. */
    const char *cap = "{\"metadata\":{\"name\":\"n\"},\"status\":{\"capacity\":{\"cpu\":\"4\",\"x\":\"1\"}}}";
    ns_node *n = ns_node_parse(cap, strlen(cap), NULL);
    ns_json *m = ns_node_status_mut(n, "capacity", NULL);
    ns_json_remove(m, "x");
    ns_json_set(m, "example.com/y", ns_json_string("2"));
    ns_quantity q;
    CHECK(ns_node_capacity(n, "example.com/y", &q) && q.units == 2); /* reads see the writes */
    check_part(n, "{\"status\":{\"capacity\":{\"cpu\":\"4\",\"x\":null,\"example.com/y\":\"2\"}}}");
    ns_node_free(n);

    const char *ready = "{\"metadata\":{\"name\":\"n\",\"labels\":{\"a\":\"1\"}},\"status\":{\"conditions\":"
                        "[{\"type\":\"Ready\",\"status\":\"True\"}],\"images\":[],\"config\":{}}}";
    n = ns_node_parse(ready, strlen(ready), NULL);
    ns_json *mine = ns_json_push(ns_node_status_mut(n, "conditions", ns_json_array()), ns_json_object());
    ns_json_set(mine, "type", ns_json_string("Mine"));
    ns_node_remove_condition(n, "Ready");
    check_part(n, "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"$patch\":\"delete\"},{\"type\":\"Mine\"}]}}");
    ns_node_free(n);

    /* Other status fields are one field. */
    n = ns_node_parse(ready, strlen(ready), NULL);
    ns_node_set_status(n, "images", ns_json_array());
    ns_node_remove_status(n, "config");
    ns_json_set(ns_node_status_mut(n, "daemonEndpoints", NULL), "port", ns_json_int(10250));
    check_part(n, "{\"status\":{\"images\":[],\"config\":null,\"daemonEndpoints\":{\"port\":10250}}}");
    ns_node_free(n);

    /* Reading through ns_node_root is free; changing through it fails. */
    ns_error err = {0};
    char *out = ns_run(set_reads_root, ready, strlen(ready), NULL, &err);
    CHECK_STR(out, "{\"metadata\":{\"labels\":{\"k\":\"1\",\"after\":\"raw\"}}}");
    free(out);
    out = ns_run(set_changes_root, ready, strlen(ready), NULL, &err);
    CHECK(!out && err.message && strstr(err.message, "changed metadata.generateName through ns_node_root"));
    ns_error_clear(&err);
    out = ns_run(set_changes_status, ready, strlen(ready), NULL, &err);
    CHECK(!out && err.message && strstr(err.message, "changed status.conditions[Ready] through"));
    ns_error_clear(&err);

    /* The host's merge. */
    const char *part = "{\"metadata\":{\"name\":\"ignored\",\"labels\":{\"a\":null,\"b\":\"2\"}},"
                       "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"$patch\":\"delete\"},"
                       "{\"type\":\"X\",\"status\":\"True\"}],\"capacity\":{\"z\":\"1\"},\"images\":null}}";
    out = ns_native_merge(ready, part, "2030-01-01T00:00:00Z", &err);
    CHECK_STR(out, "{\"metadata\":{\"name\":\"n\",\"labels\":{\"b\":\"2\"}},\"status\":{\"conditions\":"
                   "[{\"type\":\"X\",\"status\":\"True\",\"lastHeartbeatTime\":\"2030-01-01T00:00:00Z\","
                   "\"lastTransitionTime\":\"2030-01-01T00:00:00Z\"}],\"config\":{},\"capacity\":{\"z\":\"1\"}}}");
    free(out);
    const char *old = "{\"status\":{\"conditions\":[{\"type\":\"R\",\"status\":\"True\",\"lastTransitionTime\":\"2020\"},"
                      "{\"type\":\"S\",\"status\":\"True\"}]}}";
    out = ns_native_merge(old, "{\"status\":{\"conditions\":[{\"type\":\"R\",\"status\":\"True\"}]}}", "2030", &err);
    CHECK_STR(out, "{\"status\":{\"conditions\":[{\"type\":\"R\",\"status\":\"True\",\"lastHeartbeatTime\":\"2030\","
                   "\"lastTransitionTime\":\"2020\"},{\"type\":\"S\",\"status\":\"True\"}]}}");
    free(out);
    out = ns_native_merge(old, NULL, NULL, &err);
    CHECK_STR(out, old);
    free(out);
    CHECK(ns_native_merge("{", "{}", NULL, &err) == NULL && err.message);
    ns_error_clear(&err);
}

int main(void) {
    test_part();
    test_json_values();
    test_json_strings();
    test_json_malformed();
    test_node_roundtrip();
    test_node_edits();
    test_conditions();
    test_quantities();
    test_time();
    test_run();
    test_run_lines();
    ns_native_set_config(NULL);
    return check_summary("test_nodestatus");
}
