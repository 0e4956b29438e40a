/*
 * The shared conformance vectors in sdk/conformance/ (quantities, the
 * condition rules, RFC 3339 times, the part a 0.2 setter returns), which the
 * Rust, Python and JS SDKs run too. Compiled natively; the argument is the vectors' folder:
 *
 *   gcc -std=c11 -Wall -Wextra -Werror -DNODESTATUS_NATIVE \
 *       test_conformance.c src/[a-z]*.c nodestatus_native.c -o test_conformance &&
 *   ./test_conformance ../conformance
 */
#include "nodestatus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

static const char *dir = "../conformance";

static ns_json *vectors(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t len = 0;
    char *text = ns_read_file(path, 0, &len);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    ns_error err = {0};
    ns_json *v = ns_json_parse(text, len, &err);
    free(text);
    if (!v) {
        fprintf(stderr, "%s: %s\n", path, err.message);
        exit(2);
    }
    return v;
}

static ns_json *cases(ns_json *v, const char *key) {
    ns_json *list = ns_json_get(v, key);
    CHECK(ns_json_typeof(list) == NS_JSON_ARRAY && ns_json_len(list) > 0);
    return list;
}

static const char *str(const ns_json *v, const char *key) {
    const char *s = ns_json_get_str(v, key);
    if (!s) {
        fprintf(stderr, "a vector has no string %s\n", key);
        exit(2);
    }
    return s;
}

static i128 parse_i128(const char *s) {
    bool neg = *s == '-';
    i128 n = 0;
    for (s += neg; *s; s++) n = n * 10 + (*s - '0');
    return neg ? -n : n;
}

static char *i128_text(i128 n, char buf[48]) {
    char tmp[48];
    size_t k = 0;
    u128 u = n < 0 ? -(u128)n : (u128)n;
    do tmp[k++] = (char)('0' + (int)(u % 10)); while (u /= 10);
    size_t j = 0;
    if (n < 0) buf[j++] = '-';
    while (k) buf[j++] = tmp[--k];
    buf[j] = '\0';
    return buf;
}

static i128 millis_of(ns_quantity q) { return (i128)q.units * 1000 + q.millis; }

static ns_quantity_format format_of(const char *name) {
    if (strcmp(name, "BinarySI") == 0) return NS_BINARY_SI;
    if (strcmp(name, "DecimalSI") == 0) return NS_DECIMAL_SI;
    fprintf(stderr, "unknown format %s\n", name);
    exit(2);
}

/* Runs `check` on every case of `group` in the vectors file `file`. */
static void each_case(const char *file, const char *group, void (*check)(const ns_json *c)) {
    ns_json *v = vectors(file);
    ns_json *list = cases(v, group);
    for (size_t i = 0; i < ns_json_len(list); i++) check(ns_json_at(list, i));
    ns_json_free(v);
}

static void quantity_parses(const ns_json *c) {
    const char *input = str(c, "input");
    ns_quantity q;
    ns_error err = {0};
    checks++;
    if (!ns_quantity_parse(input, &q, &err)) {
        failures++;
        fprintf(stderr, "parse \"%s\": refused: %s\n", input, err.message);
        ns_error_clear(&err);
        return;
    }
    char got[48], text[NS_QUANTITY_MAX];
    i128_text(millis_of(q), got);
    ns_quantity_format_to(q, text);
    if (strcmp(got, str(c, "millis")) != 0 || q.format != format_of(str(c, "format")) ||
        strcmp(text, str(c, "canonical")) != 0) {
        failures++;
        fprintf(stderr, "parse \"%s\": got %sm %s \"%s\", want %sm %s \"%s\"\n", input, got,
                q.format == NS_BINARY_SI ? "BinarySI" : "DecimalSI", text, str(c, "millis"), str(c, "format"),
                str(c, "canonical"));
    }
}

static void quantity_is_refused(const ns_json *c) {
    const char *input = str(c, "input");
    ns_quantity q;
    ns_error err = {0};
    checks++;
    if (ns_quantity_parse(input, &q, &err)) {
        char text[NS_QUANTITY_MAX];
        failures++;
        fprintf(stderr, "parse \"%s\": accepted as %s, want it refused\n", input, ns_quantity_format_to(q, text));
    }
    ns_error_clear(&err);
}

static void quantity_formats(const ns_json *c) {
    i128 m = parse_i128(str(c, "millis"));
    i128 units = m / 1000, rem = m % 1000;
    if (rem < 0) rem += 1000, units -= 1;
    ns_quantity q = {(int64_t)units, (int32_t)rem, format_of(str(c, "format"))};
    char text[NS_QUANTITY_MAX];
    checks++;
    if (strcmp(ns_quantity_format_to(q, text), str(c, "canonical")) != 0) {
        failures++;
        fprintf(stderr, "format %sm %s: got \"%s\", want \"%s\"\n", str(c, "millis"), str(c, "format"), text,
                str(c, "canonical"));
    }
}

static void quantity_arithmetic(const ns_json *c) {
    ns_quantity a, b;
    CHECK(ns_quantity_parse(str(c, "a"), &a, NULL) && ns_quantity_parse(str(c, "b"), &b, NULL));
    char text[NS_QUANTITY_MAX];
    CHECK_STR(ns_quantity_format_to(ns_quantity_add(a, b), text), str(c, "add"));
    CHECK_STR(ns_quantity_format_to(ns_quantity_sub_floor0(a, b), text), str(c, "saturating_sub"));
}

static void quantity_units_ceil(const ns_json *c) {
    ns_quantity q;
    CHECK(ns_quantity_parse(str(c, "input"), &q, NULL));
    char want[48];
    CHECK_STR(i128_text(ns_quantity_units_ceil(q), want), str(c, "units_ceil"));
}

/* A node whose status.conditions is `conditions` (absent when null). */
static ns_node *node_with(const ns_json *conditions) {
    ns_node *node = ns_node_named("n1");
    if (ns_json_typeof(conditions) != NS_JSON_NULL)
        ns_node_set_status(node, "conditions", ns_json_clone(conditions));
    return node;
}

static bool same_conditions(ns_node *node, const ns_json *want) {
    ns_json *got = ns_json_path(ns_node_root(node), "status", "conditions", NULL);
    if (ns_json_typeof(want) == NS_JSON_NULL) return got == NULL;
    return ns_json_equal(got, want);
}

static void print_conditions(const char *name, ns_node *node, const ns_json *want) {
    char *got = ns_json_serialize(ns_json_path(ns_node_root(node), "status", "conditions", NULL), NULL);
    char *w = ns_json_serialize(want, NULL);
    fprintf(stderr, "%s: conditions %s, want %s\n", name, got, w);
    free(got);
    free(w);
}

static void condition_set(const ns_json *c) {
    ns_json *set = ns_json_get(c, "set"), *want_t = ns_json_get(c, "transition");
    const char *name = str(c, "name");
    ns_node *node = node_with(ns_json_get(c, "conditions"));
    ns_transition t = ns_node_set_condition_at(node, str(set, "type"), ns_status_parse(str(set, "status")),
                                               str(set, "reason"), str(set, "message"), str(set, "now"));
    checks++;
    if (!same_conditions(node, ns_json_get(c, "want"))) {
        failures++;
        print_conditions(name, node, ns_json_get(c, "want"));
    }
    const char *want_previous = ns_json_get_str(want_t, "previous");
    checks++;
    if (strcmp(ns_status_str(t.previous), want_previous ? want_previous : "") != 0 ||
        strcmp(ns_status_str(t.current), str(want_t, "current")) != 0 ||
        t.flipped != ns_json_is_true(ns_json_get(want_t, "flipped"))) {
        failures++;
        fprintf(stderr, "%s: transition %s -> %s flipped %d\n", name, ns_status_str(t.previous),
                ns_status_str(t.current), t.flipped);
    }
    ns_node_free(node);
}

static void condition_removed(const ns_json *c) {
    const char *name = str(c, "name");
    ns_node *node = node_with(ns_json_get(c, "conditions"));
    bool removed = ns_node_remove_condition(node, str(c, "remove"));
    checks++;
    if (removed != ns_json_is_true(ns_json_get(c, "removed")) || !same_conditions(node, ns_json_get(c, "want"))) {
        failures++;
        fprintf(stderr, "%s: removed %d\n", name, removed);
        print_conditions(name, node, ns_json_get(c, "want"));
    }
    ns_node_free(node);
}

static void time_written(const ns_json *c) {
    int64_t secs = 0;
    CHECK(ns_json_int64(ns_json_get(c, "seconds"), &secs));
    char buf[NS_TIME_MAX];
    CHECK_STR(ns_rfc3339(secs, buf), str(c, "rfc3339"));
}

/* One op of part.json through the node API. */
static void apply_op(ns_node *node, const ns_json *op) {
    const char *name = ns_json_str(ns_json_at(op, 0));
    const char *a = ns_json_str(ns_json_at(op, 1)), *b = ns_json_str(ns_json_at(op, 2));
    ns_quantity q;
    if (!name) name = "";
    if (strcmp(name, "set_label") == 0) ns_node_set_label(node, a, b);
    else if (strcmp(name, "remove_label") == 0) ns_node_remove_label(node, a);
    else if (strcmp(name, "set_annotation") == 0) ns_node_set_annotation(node, a, b);
    else if (strcmp(name, "remove_annotation") == 0) ns_node_remove_annotation(node, a);
    else if (strcmp(name, "set_condition") == 0)
        ns_node_set_condition(node, a, ns_status_parse(b), ns_json_str(ns_json_at(op, 3)),
                              ns_json_str(ns_json_at(op, 4)));
    else if (strcmp(name, "remove_condition") == 0) ns_node_remove_condition(node, a);
    else if (strcmp(name, "set_capacity") == 0 && ns_quantity_parse(b, &q, NULL)) ns_node_set_capacity(node, a, q);
    else if (strcmp(name, "set_allocatable") == 0 && ns_quantity_parse(b, &q, NULL)) ns_node_set_allocatable(node, a, q);
    else if (strcmp(name, "remove_resource") == 0) ns_node_remove_resource(node, a);
    else if (strcmp(name, "set_node_info") == 0) ns_node_set_info(node, a, b);
    else if (strcmp(name, "set_addresses") == 0) {
        const ns_json *list = ns_json_at(op, 1);
        ns_address addrs[16];
        size_t n = ns_json_len(list) < 16 ? ns_json_len(list) : 16;
        for (size_t i = 0; i < n; i++) {
            addrs[i].type = ns_json_str(ns_json_at(ns_json_at(list, i), 0));
            addrs[i].address = ns_json_str(ns_json_at(ns_json_at(list, i), 1));
        }
        ns_node_set_addresses(node, addrs, n);
    } else {
        fprintf(stderr, "part.json: unknown op %s\n", name);
        exit(2);
    }
}

/* A part as the vectors compare it: conditions on type, status, reason and
 * message (and $patch), an empty reason or message as absent. Frees part. */
static ns_json *comparable(ns_json *part) {
    ns_json *list = ns_json_path(part, "status", "conditions", NULL);
    for (size_t i = 0; i < ns_json_len(list); i++) {
        ns_json *c = ns_json_at(list, i), *kept = ns_json_object();
        static const char *const keys[] = {"type", "status", "reason", "message", "$patch"};
        for (size_t k = 0; k < 5; k++) {
            const ns_json *v = ns_json_get(c, keys[k]);
            if (v && !(k > 0 && ns_json_str(v) && ns_json_str(v)[0] == '\0')) ns_json_set(kept, keys[k], ns_json_clone(v));
        }
        /* Replace c's members with kept's. */
        while (ns_json_len(c)) ns_json_remove(c, ns_json_key_at(c, 0));
        for (size_t k = 0; k < ns_json_len(kept); k++)
            ns_json_set(c, ns_json_key_at(kept, k), ns_json_clone(ns_json_value_at(kept, k)));
        ns_json_free(kept);
    }
    return part;
}

static const ns_json *current_ops;

static int set_ops(ns_node *node, ns_error *err) {
    (void)err;
    for (size_t i = 0; i < ns_json_len(current_ops); i++) apply_op(node, ns_json_at(current_ops, i));
    return 0;
}

static void check_part(const char *name, const char *how, ns_json *got, const ns_json *want) {
    got = comparable(got);
    checks++;
    if (!ns_json_equal(got, want)) {
        failures++;
        char *g = ns_json_serialize(got, NULL), *w = ns_json_serialize(want, NULL);
        fprintf(stderr, "%s (%s): part %s, want %s\n", name, how, g, w);
        free(g);
        free(w);
    }
    ns_json_free(got);
}

/* Every case of part.json, through the node API and through ns_run (what
 * the component's set export returns). */
static void parts(void) {
    ns_json *v = vectors("part.json");
    size_t len = 0;
    char *node_json = ns_json_serialize(ns_json_get(v, "node"), &len);
    ns_json *list = cases(v, "cases");
    for (size_t i = 0; i < ns_json_len(list); i++) {
        const ns_json *c = ns_json_at(list, i);
        const char *name = str(c, "name");
        current_ops = ns_json_get(c, "ops");
        ns_node *node = ns_node_parse(node_json, len, NULL);
        set_ops(node, NULL);
        check_part(name, "ns_node_part", ns_node_part(node), ns_json_get(c, "part"));
        ns_node_free(node);
        ns_error err = {0};
        char *out = ns_run(set_ops, node_json, len, NULL, &err);
        CHECK(out != NULL);
        if (out) check_part(name, "ns_run", ns_json_parse(out, strlen(out), NULL), ns_json_get(c, "part"));
        free(out);
        ns_error_clear(&err);
    }
    free(node_json);
    ns_json_free(v);
}

int main(int argc, char **argv) {
    if (argc > 1) dir = argv[1];
    each_case("quantity.json", "parse", quantity_parses);
    each_case("quantity.json", "invalid", quantity_is_refused);
    each_case("quantity.json", "format", quantity_formats);
    each_case("quantity.json", "arithmetic", quantity_arithmetic);
    each_case("quantity.json", "units_ceil", quantity_units_ceil);
    each_case("condition.json", "set", condition_set);
    each_case("condition.json", "remove", condition_removed);
    each_case("time.json", "rfc3339", time_written);
    parts();
    return check_summary("test_conformance");
}
