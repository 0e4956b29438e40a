/*
 * nodestatus.h: write nodestatus node-status setters in C.
 *
 * The C counterpart of the Rust SDK in sdk/. A setter is a WebAssembly
 * component implementing the WIT world `nodestatus:plugin/plugin@0.2.1`
 * (wit/plugin.wit, with wit/deps/): `set` is given the whole node and
 * returns the setter's part of it, the fields it sets. The SDK records what
 * the setter writes through the node's helpers and returns that part. With
 * this SDK a plugin is one C file:
 *
 *     #include "nodestatus.h"
 *
 *     static ns_metadata metadata(void) {
 *         static const char *paths[] = {"/run", NULL};
 *         return (ns_metadata){.name = "maintenance", .version = "0.1.0",
 *                              .description = "marks the node when /run/maintenance exists",
 *                              .paths = paths};
 *     }
 *
 *     static int set(ns_node *node, ns_error *err) {
 *         (void)err;
 *         bool on = access("/run/maintenance", F_OK) == 0;
 *         ns_node_set_label(node, "example.com/maintenance", on ? "true" : "false");
 *         ns_node_set_condition(node, "Maintenance", ns_status_from_bool(on),
 *                               on ? "MaintenanceScheduled" : "NoMaintenance", "");
 *         return 0;
 *     }
 *
 *     NODESTATUS_EXPORT(metadata, set);
 *
 * Files:
 *   nodestatus.h         this header
 *   src/[a-z]*.c         the SDK, one file per concern (plain C11 + libc):
 *                          json.c (the DOM), json_text.c (parse, serialize,
 *                          UTF-8), quantity.c, time.c, node.c, condition.c,
 *                          part.c (the part), run.c (ns_run), util.c
 *                          (allocation, errors, files);
 *                          src/internal.h is what they share
 *   nodestatus_wasm.c    the glue to the wit-bindgen C bindings (WebAssembly only)
 *   nodestatus_reactor_wasm.c  the glue of a reactor's exports (world reactor-plugin)
 *   nodestatus_native.c  native stand-ins for the host functions, for unit tests
 *
 * Memory: every function that allocates aborts the program when malloc fails
 * (in the sandbox, running out of memory stops the call anyway). Pointers
 * returned as `const` are borrowed from the DOM and stay valid until that
 * value is changed or freed; `char *` results are the caller's to free().
 */
#ifndef NODESTATUS_H
#define NODESTATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define NS_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define NS_PRINTF(f, a)
#endif

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

/* An error message a setter returns; the host reports it. */
typedef struct ns_error {
    char *message; /* NULL when unset; owned */
} ns_error;

/* Sets the message (printf-style), replacing an earlier one, and returns -1,
 * so that a setter can write `return ns_error_set(err, "...", ...);`.
 * `err` may be NULL. */
int ns_error_set(ns_error *err, const char *fmt, ...) NS_PRINTF(2, 3);
/* Frees the message and resets it to NULL. */
void ns_error_clear(ns_error *err);

/* ------------------------------------------------------------------ */
/* JSON                                                                */
/* ------------------------------------------------------------------ */

/* A JSON value. Numbers keep their source text, so nothing is lost; objects
 * keep their keys in order (a duplicate key in the input replaces the
 * earlier value, as serde_json and Go do). Strings are UTF-8 and may hold
 * NUL bytes (use the _len accessors for those). */
typedef enum ns_json_type {
    NS_JSON_NULL,
    NS_JSON_BOOL,
    NS_JSON_NUMBER,
    NS_JSON_STRING,
    NS_JSON_ARRAY,
    NS_JSON_OBJECT
} ns_json_type;

typedef struct ns_json ns_json;

/* Parses JSON text (RFC 8259, UTF-8, nesting at most 128 deep). Returns NULL
 * and sets `err` ("... at line L column C") when the text is not exactly one
 * JSON value. */
ns_json *ns_json_parse(const char *text, size_t len, ns_error *err);
/* Serializes compactly (no spaces). Strings are escaped as JSON requires;
 * invalid UTF-8 in a string built by the program becomes U+FFFD, so the output
 * is always valid UTF-8. Returns a NUL-terminated malloc'd string; its length
 * in *len when len is not NULL. */
char *ns_json_serialize(const ns_json *v, size_t *len);
void ns_json_free(ns_json *v);
ns_json *ns_json_clone(const ns_json *v);
/* Deep equality; numbers compare by their text. */
bool ns_json_equal(const ns_json *a, const ns_json *b);

ns_json *ns_json_null(void);
ns_json *ns_json_bool(bool b);
ns_json *ns_json_string(const char *s);
ns_json *ns_json_string_len(const char *s, size_t len);
ns_json *ns_json_int(int64_t n);
ns_json *ns_json_uint(uint64_t n);
/* A number from its text; NULL when `text` is not a JSON number. */
ns_json *ns_json_number_text(const char *text);
ns_json *ns_json_array(void);
ns_json *ns_json_object(void);

ns_json_type ns_json_typeof(const ns_json *v); /* NS_JSON_NULL for NULL */
bool ns_json_is_true(const ns_json *v);
/* The string's bytes (NUL-terminated), or NULL when v is not a string. */
const char *ns_json_str(const ns_json *v);
size_t ns_json_str_len(const ns_json *v);
/* The number's source text, or NULL when v is not a number. */
const char *ns_json_num_text(const ns_json *v);
/* The number as an integer; false when v is not a number that is an
 * integer in range (e.g. 1.5, 1e3 or 2^63). */
bool ns_json_int64(const ns_json *v, int64_t *out);
bool ns_json_uint64(const ns_json *v, uint64_t *out);
/* The number as a double (strtod); false when v is not a number. */
bool ns_json_double(const ns_json *v, double *out);

/* Arrays and objects: the number of elements or members; 0 for others. */
size_t ns_json_len(const ns_json *v);
/* The i-th element of an array, or NULL. */
ns_json *ns_json_at(const ns_json *arr, size_t i);
/* Appends `item` (taking ownership) to an array. Returns item. */
ns_json *ns_json_push(ns_json *arr, ns_json *item);
/* Removes and frees the i-th element; false when out of range. */
bool ns_json_remove_at(ns_json *arr, size_t i);

/* The member `key` of an object, or NULL (also when obj is not an object). */
ns_json *ns_json_get(const ns_json *obj, const char *key);
/* Follows a NULL-terminated list of keys: ns_json_path(node, "status",
 * "nodeInfo", "kernelVersion", NULL). */
ns_json *ns_json_path(const ns_json *v, ...);
/* The string member `key`, or NULL when absent or not a string. */
const char *ns_json_get_str(const ns_json *obj, const char *key);
/* Sets member `key` (taking ownership of val): replaced in place when present,
 * else appended. Returns val. obj must be an object. */
ns_json *ns_json_set(ns_json *obj, const char *key, ns_json *val);
/* Removes and frees member `key`; returns whether it was there. */
bool ns_json_remove(ns_json *obj, const char *key);
/* The i-th member's key and value, in order. */
const char *ns_json_key_at(const ns_json *obj, size_t i);
ns_json *ns_json_value_at(const ns_json *obj, size_t i);

/* ------------------------------------------------------------------ */
/* Quantities                                                          */
/* ------------------------------------------------------------------ */

/* A Kubernetes resource quantity (2, 1500m, 16Gi, 1.5G), exact to the
 * milli-unit: `units` + `millis`/1000, with 0 <= millis < 1000 (so -1.5 is
 * units -2, millis 500). Range: whole units fit in int64 (up to 7Ei). */
typedef enum ns_quantity_format {
    NS_DECIMAL_SI, /* powers of 1000: m, k, M, G, T, P, E */
    NS_BINARY_SI   /* powers of 1024: Ki, Mi, Gi, Ti, Pi, Ei */
} ns_quantity_format;

typedef struct ns_quantity {
    int64_t units;
    int32_t millis;
    ns_quantity_format format;
} ns_quantity;

/* Big enough for any formatted quantity. */
#define NS_QUANTITY_MAX 32

/* Whole units, written in decimal (cpu, pods). */
ns_quantity ns_quantity_units(int64_t n);
/* Thousandths of a unit (1500m CPU). */
ns_quantity ns_quantity_from_millis(int64_t m);
/* A byte count, written in binary units (memory). */
ns_quantity ns_quantity_bytes(uint64_t b);
/* Parses the API server's syntax: [+-]digits[.digits][suffix] with suffix
 * one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or e<exp>/E<exp>. Sub-milli
 * fractions round up (away from zero), as the API server does. Returns false
 * and sets err on bad syntax or a value out of range. */
bool ns_quantity_parse(const char *s, ns_quantity *out, ns_error *err);
/* The canonical form: "<n>m" when not whole, else the largest suffix of its
 * format that writes it as a whole number ("16Gi", "2k", "1500"); a binary
 * quantity under 1Ki is written in decimal, as Kubernetes does (1000 bytes is
 * "1k"). Writes at most NS_QUANTITY_MAX bytes, NUL included; returns buf. */
char *ns_quantity_format_to(ns_quantity q, char buf[NS_QUANTITY_MAX]);
/* -1, 0, 1. */
int ns_quantity_cmp(ns_quantity a, ns_quantity b);
/* a + b, and a - b but never below zero (the kubelet's allocatable rule);
 * both keep a's format and saturate at the int64 range. */
ns_quantity ns_quantity_add(ns_quantity a, ns_quantity b);
ns_quantity ns_quantity_sub_floor0(ns_quantity a, ns_quantity b);
/* Whole units rounded up; the value in millis (saturating). */
int64_t ns_quantity_units_ceil(ns_quantity q);
int64_t ns_quantity_as_millis(ns_quantity q);

/* ------------------------------------------------------------------ */
/* Time                                                                */
/* ------------------------------------------------------------------ */

/* Big enough for an RFC 3339 timestamp with seconds. */
#define NS_TIME_MAX 32
/* "2026-01-02T03:04:05Z" for seconds since the epoch (UTC). Returns buf. */
char *ns_rfc3339(int64_t secs, char buf[NS_TIME_MAX]);
/* The current time, as ns_rfc3339 writes it. */
char *ns_now(char buf[NS_TIME_MAX]);

/* ------------------------------------------------------------------ */
/* Conditions                                                          */
/* ------------------------------------------------------------------ */

typedef enum ns_status {
    NS_NONE = 0, /* no such condition (only as a previous status) */
    NS_TRUE,
    NS_FALSE,
    NS_UNKNOWN
} ns_status;

/* "True", "False", "Unknown" ("" for NS_NONE). */
const char *ns_status_str(ns_status s);
/* NS_TRUE when b, else NS_FALSE. */
ns_status ns_status_from_bool(bool b);
/* Parses the API's spelling; NS_NONE for anything else. */
ns_status ns_status_parse(const char *s);

/* What ns_node_set_condition did. */
typedef struct ns_transition {
    ns_status previous; /* NS_NONE when the condition is new */
    ns_status current;
    bool flipped; /* new, or its status changed: when the kubelet records an event */
} ns_transition;

/* A condition as the API has it; the strings are borrowed from the node and
 * NULL when absent. */
typedef struct ns_condition {
    const char *type;
    const char *status;
    const char *last_heartbeat_time;
    const char *last_transition_time;
    const char *reason;
    const char *message;
} ns_condition;

/* ------------------------------------------------------------------ */
/* Node                                                                */
/* ------------------------------------------------------------------ */

/* A v1.Node, as JSON, and the record of the fields the setter wrote in it.
 *
 * The part (ns_node_part, what ns_run returns) holds every field written,
 * even to the value the node already held (a field left out is one the
 * setter no longer sets, and the host removes it), at its value after the
 * call: a removed key as null, a removed condition as
 * {"type": T, "$patch": "delete"}. Reads after writes see the writes.
 * - Labels, annotations, capacity, allocatable and nodeInfo keys and
 *   conditions (by type) are fields one by one: the helpers write them.
 * - Another key of status (addresses, ...) is one field: ns_node_set_status,
 *   ns_node_remove_status, ns_node_status_mut.
 * - ns_node_status_mut, ns_node_set_status and ns_node_remove_status of a
 *   keyed section (capacity, allocatable, nodeInfo, conditions) claim the
 *   whole section: every key in it after the call is in the part (and a key
 *   removed from it, as null).
 * - ns_node_root, ns_node_status and ns_node_metadata give the node itself,
 *   to read. A change made there, outside the helpers, is one the SDK cannot
 *   attribute: ns_run fails with a message that names the field. */
typedef struct ns_node ns_node;

/* Parses a Node. Fails (NULL, err set) on text that is not a JSON object, or
 * whose metadata or status is not an object. */
ns_node *ns_node_parse(const char *json, size_t len, ns_error *err);
/* A node with only a name, for tests and examples. */
ns_node *ns_node_named(const char *name);
/* The whole Node as JSON (malloc'd, NUL-terminated; length in *len if not
 * NULL); not the part (ns_node_part_json). */
char *ns_node_to_json(const ns_node *node, size_t *len);
void ns_node_free(ns_node *node);
/* The whole document, to read anything the helpers do not cover (a change
 * made in it fails ns_run: see ns_node). */
ns_json *ns_node_root(ns_node *node);
/* The setter's part: every field written so far (see ns_node); no kind,
 * apiVersion or name, no empty section ({} when nothing was written). The
 * caller frees it (ns_json_free). */
ns_json *ns_node_part(const ns_node *node);
/* The part as JSON (malloc'd, NUL-terminated; length in *len if not NULL). */
char *ns_node_part_json(const ns_node *node, size_t *len);

/* metadata.name, or "". */
const char *ns_node_name(const ns_node *node);
/* A field of metadata / status, or NULL when absent or null: to read, not
 * to change (see ns_node; ns_node_status_mut is for changing). */
ns_json *ns_node_metadata(const ns_node *node, const char *key);
ns_json *ns_node_status(const ns_node *node, const char *key);
/* Replaces a field of status (taking ownership of value), which the setter
 * then sets; for a keyed section, every key in it after the call. */
void ns_node_set_status(ns_node *node, const char *key, ns_json *value);
/* Removes a field of status (its keys, for a keyed section); returns whether
 * it was there. */
bool ns_node_remove_status(ns_node *node, const char *key);
/* A field of status to change in place, set to `default_value` (taken over;
 * NULL: an empty object) first when it is absent; otherwise default_value is
 * freed. The setter sets the whole field; for a keyed section (capacity,
 * allocatable, nodeInfo, conditions), every key in it after the call. */
ns_json *ns_node_status_mut(ns_node *node, const char *key, ns_json *default_value);

/* Labels and annotations. Getters return NULL when absent. Setters and
 * removers write the field (in the part, even when the node held that
 * already); removers return whether the key was there. */
const char *ns_node_label(const ns_node *node, const char *key);
void ns_node_set_label(ns_node *node, const char *key, const char *value);
bool ns_node_remove_label(ns_node *node, const char *key);
const char *ns_node_annotation(const ns_node *node, const char *key);
void ns_node_set_annotation(ns_node *node, const char *key, const char *value);
bool ns_node_remove_annotation(ns_node *node, const char *key);

/* status.capacity[name] / status.allocatable[name]: false when absent or not
 * a quantity. */
bool ns_node_capacity(const ns_node *node, const char *name, ns_quantity *out);
bool ns_node_allocatable(const ns_node *node, const char *name, ns_quantity *out);
void ns_node_set_capacity(ns_node *node, const char *name, ns_quantity q);
void ns_node_set_allocatable(ns_node *node, const char *name, ns_quantity q);
/* Removes status.capacity[name] and status.allocatable[name]. */
void ns_node_remove_resource(ns_node *node, const char *name);

/* status.nodeInfo.<field>. */
const char *ns_node_info(const ns_node *node, const char *field);
void ns_node_set_info(ns_node *node, const char *field, const char *value);

/* Replaces status.addresses with (type, address) pairs. */
typedef struct ns_address {
    const char *type;    /* InternalIP, ExternalIP, Hostname, ... */
    const char *address;
} ns_address;
void ns_node_set_addresses(ns_node *node, const ns_address *addrs, size_t n);

/* The condition of this type; false when there is none. */
bool ns_node_condition(const ns_node *node, const char *type, ns_condition *out);
/* Sets a condition with the kubelet's rules, at the current time:
 * - lastHeartbeatTime is now on every call;
 * - a new condition, or one whose status flips, gets lastTransitionTime =
 *   now; otherwise the transition time is kept;
 * - reason and message are replaced;
 * - a new condition is appended (a setter that runs last puts its own last).
 * The result says whether the status flipped. */
ns_transition ns_node_set_condition(ns_node *node, const char *type, ns_status status,
                                    const char *reason, const char *message);
/* The same at a given time (an RFC 3339 string), for tests. */
ns_transition ns_node_set_condition_at(ns_node *node, const char *type, ns_status status,
                                       const char *reason, const char *message,
                                       const char *now);
/* Removes a condition; returns whether it was there. The part says so
 * ({"type": T, "$patch": "delete"}) either way. */
bool ns_node_remove_condition(ns_node *node, const char *type);

/* ------------------------------------------------------------------ */
/* Plugin                                                              */
/* ------------------------------------------------------------------ */

/* What a plugin is and what it asks for. The lists are NULL-terminated
 * (NULL for none). */
typedef struct ns_metadata {
    const char *name;        /* lowercase letters, digits and '-', at most 63 bytes */
    const char *version;     /* ideally SemVer */
    const char *description; /* one line */
    const char *const *paths; /* absolute directories to read, granted read-only */
    const char *const *env;   /* environment variables to read */
    bool affects_readiness;   /* whether its failure makes the node not Ready */
} ns_metadata;

/* A setter: changes its part of the node; returns 0, or nonzero with err set
 * (a failure without a message is reported as "setter failed"). */
typedef int (*ns_set_fn)(ns_node *node, ns_error *err);

/* Runs a setter over a Node's JSON: parse, set, and the setter's part of the
 * node (ns_node_part_json). Returns the part's JSON (malloc'd; length in
 * *out_len), or NULL with err set. The export glue calls it, and returns
 * `some(part)`; tests call it natively with the same JSON (and
 * ns_native_apply gives the node as the host has it after the merge). */
char *ns_run(ns_set_fn set, const char *json, size_t len, size_t *out_len, ns_error *err);

/* Exports a plugin: `metadata_fn` is `ns_metadata f(void)`, `set_fn` an
 * ns_set_fn. Write it once, at file scope, with a semicolon:
 *     NODESTATUS_EXPORT(metadata, set);
 * It defines nodestatus_plugin_metadata and nodestatus_plugin_set, which the
 * export glue (nodestatus_wasm.c) calls; natively, tests may call them too. */
#define NODESTATUS_EXPORT(metadata_fn, set_fn)                                          \
    ns_metadata nodestatus_plugin_metadata(void) { return metadata_fn(); }              \
    int nodestatus_plugin_set(ns_node *node, ns_error *err) { return set_fn(node, err); } \
    extern int nodestatus_plugin_exported_
ns_metadata nodestatus_plugin_metadata(void);
int nodestatus_plugin_set(ns_node *node, ns_error *err);

/* ------------------------------------------------------------------ */
/* Reactor (WIT 0.2.1's `reactor`, world `reactor-plugin`)             */
/* ------------------------------------------------------------------ */
/* A setter that also reacts between passes to the kernel log, a log file
 * or the journal: the host reads the streams, matches the patterns itself,
 * and calls on_lines with the matches within a second; its part is
 * everything the plugin sets, as set's is. Export it with
 * NODESTATUS_EXPORT_REACTOR; scripts/guests/c.sh builds a plugin that
 * defines nodestatus_plugin_on_lines against the world reactor-plugin
 * (with nodestatus_reactor_wasm.c), any other against plugin. */

/* Where a stream's lines come from. */
typedef enum ns_source {
    NS_SOURCE_KMSG = 0,    /* the kernel log (/dev/kmsg), the level prefix taken off */
    NS_SOURCE_FILE = 1,    /* a growing text file (`path`), followed as `tail -F` does */
    NS_SOURCE_JOURNAL = 2, /* the systemd journal: entries of `units` (all when NULL) */
} ns_source;

/* One stream a plugin follows. The operator grants its source in the
 * plugin's `streams` (kmsg, journal, or the file's path). The lists are
 * NULL-terminated (NULL for none). */
typedef struct ns_stream {
    const char *name;             /* the plugin's name for it; each match names it */
    ns_source source;
    const char *path;             /* NS_SOURCE_FILE: the file's absolute path */
    const char *const *units;     /* NS_SOURCE_JOURNAL: units or identifiers */
    const char *const *patterns;  /* regular expressions (RE2's syntax), at most 256 */
    uint32_t span;                /* lines one pattern may span, 1 to 64; 0 is 1 */
    uint64_t lookback_seconds;    /* how far back to start; 0: from now on */
    const char *extract;          /* its first group is each line's message; NULL: none */
} ns_stream;

/* What a plugin follows. */
typedef struct ns_subscriptions {
    const ns_stream *streams;
    size_t streams_len;
    const char *const *watch; /* granted paths whose change calls set at once */
} ns_subscriptions;

/* One matched line (or lines, for a pattern that spans several). */
typedef struct ns_match {
    const char *stream; /* the stream's name */
    uint32_t pattern;   /* the index of the pattern that matched */
    const char *text;   /* what matched, NUL-terminated; cut at 64 KiB */
    uint64_t time_ms;   /* when it was written, ms since the Unix epoch */
} ns_match;

/* The matches of one call, oldest first, and how many the host dropped
 * since the last call (the plugin's queue was full). */
typedef struct ns_lines {
    const ns_match *matches;
    size_t len;
    uint64_t dropped;
} ns_lines;

/* A reactor's handler: writes its part on the node as set does; returns 0,
 * or nonzero with err set. */
typedef int (*ns_lines_fn)(ns_node *node, const ns_lines *lines, ns_error *err);

/* ns_run for on_lines: parse, on_lines, and the part's JSON (malloc'd;
 * length in *out_len), or NULL with err set. Tests call it natively to feed
 * lines, as the host would hand them over. */
char *ns_run_lines(ns_lines_fn on_lines, const char *json, size_t len, const ns_lines *lines,
                   size_t *out_len, ns_error *err);

/* Exports a reactor: NODESTATUS_EXPORT's two, and `subscribe_fn`
 * (`ns_subscriptions f(void)`: called once at load, with the config
 * readable; what it returns must stay valid until it returns, the glue
 * copies it) and `lines_fn` (an ns_lines_fn). Instead of NODESTATUS_EXPORT:
 *     NODESTATUS_EXPORT_REACTOR(metadata, set, subscribe, on_lines); */
#define NODESTATUS_EXPORT_REACTOR(metadata_fn, set_fn, subscribe_fn, lines_fn)                  \
    NODESTATUS_EXPORT(metadata_fn, set_fn);                                                   \
    ns_subscriptions nodestatus_plugin_subscribe(void) { return subscribe_fn(); }              \
    int nodestatus_plugin_on_lines(ns_node *node, const ns_lines *lines, ns_error *err) {      \
        return lines_fn(node, lines, err);                                                    \
    }                                                                                         \
    extern int nodestatus_plugin_exported_
ns_subscriptions nodestatus_plugin_subscribe(void);
int nodestatus_plugin_on_lines(ns_node *node, const ns_lines *lines, ns_error *err);

/* ------------------------------------------------------------------ */
/* Host functions (nodestatus:plugin/host)                             */
/* ------------------------------------------------------------------ */
/* In the sandbox these call the host (nodestatus_wasm.c); natively they are
 * stand-ins (nodestatus_native.c). */

typedef enum ns_log_level {
    NS_LOG_TRACE,
    NS_LOG_DEBUG,
    NS_LOG_INFO,
    NS_LOG_WARN,
    NS_LOG_ERROR
} ns_log_level;

/* Writes one line to the host's log (printf-style), tagged with the plugin's
 * name. Lines over 4 KiB are cut; over 100 lines per call are dropped. */
void ns_log(ns_log_level level, const char *fmt, ...) NS_PRINTF(2, 3);
#define ns_trace(...) ns_log(NS_LOG_TRACE, __VA_ARGS__)
#define ns_debug(...) ns_log(NS_LOG_DEBUG, __VA_ARGS__)
#define ns_info(...) ns_log(NS_LOG_INFO, __VA_ARGS__)
#define ns_warn(...) ns_log(NS_LOG_WARN, __VA_ARGS__)

/* The plugin's config from the operator, as JSON ("{}" when none);
 * malloc'd. */
char *ns_config_json(void);
/* The config, parsed (caller frees with ns_json_free); NULL with err set
 * ("invalid plugin config: ...") when it does not parse. */
ns_json *ns_config(ns_error *err);

typedef enum ns_event_type { NS_EVENT_NORMAL, NS_EVENT_WARNING } ns_event_type;
/* Records a Kubernetes Event about this node (reason UpperCamelCase). */
void ns_record_event(ns_event_type type, const char *reason, const char *message);

/* Kernel and identity facts; free with ns_system_info_free. */
typedef struct ns_system_info {
    char *hostname;       /* uname -n */
    char *kernel_release; /* uname -r */
    char *kernel_version; /* uname -v */
    char *machine;        /* uname -m */
    char *os_release;     /* /etc/os-release, "" when absent */
    char *machine_id;
    char *system_uuid;
    char *boot_id;
    uint32_t cpus;
} ns_system_info;
void ns_system_info_get(ns_system_info *out);
void ns_system_info_free(ns_system_info *info);

typedef struct ns_ip_address {
    char *address; /* canonical text form */
    uint8_t prefix_len;
} ns_ip_address;
typedef struct ns_network_interface {
    char *name;
    bool up;
    bool loopback;
    ns_ip_address *addresses;
    size_t addresses_len;
} ns_network_interface;
/* The host's network interfaces; returns how many, the array in *out (free
 * with ns_network_interfaces_free). */
size_t ns_network_interfaces(ns_network_interface **out);
void ns_network_interfaces_free(ns_network_interface *ifs, size_t n);

typedef struct ns_fs_stats {
    uint64_t total_bytes;
    uint64_t free_bytes;
    uint64_t available_bytes;
    uint64_t total_inodes;
    uint64_t free_inodes;
    bool read_only;
} ns_fs_stats;
/* Statistics of the filesystem holding `path`, which must lie in a granted
 * path. Returns 0, or -1 with err set. */
int ns_statvfs(const char *path, ns_fs_stats *out, ns_error *err);

/* Problems that make the node not ready; returns how many, the strings in
 * *out (free with ns_strings_free). */
size_t ns_node_problems(char ***out);
void ns_strings_free(char **list, size_t n);

#ifdef NODESTATUS_NATIVE
/* Native only: what ns_config_json and ns_node_problems return, and where
 * ns_log writes (NULL, the default: nowhere). */
#include <stdio.h>
void ns_native_set_config(const char *json);
void ns_native_set_problems(const char *const *problems); /* NULL-terminated */
void ns_native_set_log(FILE *f);
/* The node as the host has it after merging a setter's part into it (JSON
 * text each; part NULL is the WIT's `none`: nothing changes): a label,
 * annotation, capacity, allocatable or nodeInfo key is set, or removed when
 * null; a condition replaces the one of its type (or is appended), and
 * {"type": T, "$patch": "delete"} removes it; the host stamps the
 * conditions' times (heartbeat `now`; transition `now` only when the status
 * changed; `now` NULL: the current time); any other field is replaced whole,
 * or removed when null; kind, apiVersion and metadata.name are not merged.
 * Returns the merged node's JSON (malloc'd), or NULL with err set when either
 * does not parse. */
char *ns_native_merge(const char *node_json, const char *part_json, const char *now, ns_error *err);
/* ns_run, then ns_native_merge of its part into `json`: the node as the host
 * has it after this setter's call (malloc'd), or NULL with err set. The part
 * stays readable with ns_native_last_part until the next call. */
char *ns_native_apply(ns_set_fn set, const char *json, ns_error *err);
/* The part of the last ns_native_apply call, or NULL. */
const char *ns_native_last_part(void);
/* The events recorded (ns_record_event) since the last call, one a line,
 * "Warning Reason: message\n" (malloc'd; "" when none). */
char *ns_native_take_events(void);
#endif

/* Small helpers every setter needs. */

/* Reads a whole file (at most `max` bytes, 0 for 16 MiB) into a malloc'd
 * NUL-terminated buffer. Returns NULL with errno set on failure. */
char *ns_read_file(const char *path, size_t max, size_t *len);
/* A copy of `len` bytes as valid UTF-8 (each invalid byte becomes U+FFFD),
 * NUL-terminated and malloc'd; its length in *out_len when not NULL. The
 * host refuses strings that are not UTF-8, so the glue passes every string
 * through this. */
char *ns_utf8_sanitize(const char *s, size_t len, size_t *out_len);
/* malloc/realloc/strdup that abort when out of memory. */
void *ns_xmalloc(size_t n);
void *ns_xrealloc(void *p, size_t n);
char *ns_xstrdup(const char *s);

#ifdef __cplusplus
}
#endif

#endif /* NODESTATUS_H */
