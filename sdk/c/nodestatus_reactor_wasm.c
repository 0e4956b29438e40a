/*
 * nodestatus_reactor_wasm.c: the glue of a reactor's exports (WIT 0.2.1,
 * world nodestatus:plugin/reactor-plugin@0.2.1, which adds reactor@0.2.1 to
 * plugin's): subscribe and on-lines. Compile it beside nodestatus_wasm.c,
 * with the bindings of `wit-bindgen c wit --world reactor-plugin
 * --rename-world plugin` (plugin.h: the names nodestatus_wasm.c uses), for a
 * plugin that exports a reactor (NODESTATUS_EXPORT_REACTOR); the ownership
 * rules are nodestatus_wasm.c's.
 */
#include "nodestatus.h"
#include "plugin.h"

#include <stdlib.h>
#include <string.h>

/* From nodestatus_wasm.c. */
plugin_string_t ns__out_string(const char *s);
plugin_list_string_t ns__out_list(const char *const *items);
bool ns__out_part(char *out, size_t len, ns_error *e, plugin_option_string_t *ret, plugin_string_t *err);

void exports_nodestatus_plugin_0_2_1_reactor_subscribe(exports_nodestatus_plugin_0_2_1_reactor_subscriptions_t *ret) {
    ns_subscriptions s = nodestatus_plugin_subscribe();
    memset(ret, 0, sizeof *ret);
    if (s.streams_len > 0) {
        ret->streams.ptr = ns_xmalloc(sizeof *ret->streams.ptr * s.streams_len);
        ret->streams.len = s.streams_len;
    }
    for (size_t i = 0; i < s.streams_len; i++) {
        const ns_stream *in = &s.streams[i];
        exports_nodestatus_plugin_0_2_1_reactor_stream_t *o = &ret->streams.ptr[i];
        memset(o, 0, sizeof *o);
        o->name = ns__out_string(in->name);
        o->source.tag = (uint8_t)in->source;
        if (in->source == NS_SOURCE_FILE) o->source.val.file = ns__out_string(in->path);
        if (in->source == NS_SOURCE_JOURNAL) o->source.val.journal = ns__out_list(in->units);
        o->patterns = ns__out_list(in->patterns);
        o->span = in->span ? in->span : 1;
        o->extract.is_some = in->extract != NULL;
        if (in->extract) o->extract.val = ns__out_string(in->extract);
        o->lookback_seconds = in->lookback_seconds;
    }
    ret->watch = ns__out_list(s.watch);
}

/* on-lines: the matches as NUL-terminated strings, then ns_run_lines. */
bool exports_nodestatus_plugin_0_2_1_reactor_on_lines(plugin_string_t *node,
                                                      exports_nodestatus_plugin_0_2_1_reactor_batch_t *batch,
                                                      plugin_option_string_t *ret, plugin_string_t *err) {
    size_t n = batch->matches.len;
    ns_match *matches = ns_xmalloc(sizeof *matches * (n ? n : 1));
    for (size_t i = 0; i < n; i++) {
        exports_nodestatus_plugin_0_2_1_reactor_match_t *m = &batch->matches.ptr[i];
        char *stream = ns_xmalloc(m->stream.len + 1), *text = ns_xmalloc(m->text.len + 1);
        memcpy(stream, m->stream.ptr, m->stream.len);
        stream[m->stream.len] = '\0';
        memcpy(text, m->text.ptr, m->text.len);
        text[m->text.len] = '\0';
        matches[i] = (ns_match){.stream = stream, .pattern = m->pattern, .text = text, .time_ms = m->time_ms};
    }
    ns_lines lines = {.matches = matches, .len = n, .dropped = batch->dropped};
    exports_nodestatus_plugin_0_2_1_reactor_batch_free(batch);
    ns_error e = {0};
    size_t len = 0;
    char *out = ns_run_lines(nodestatus_plugin_on_lines, (const char *)node->ptr, node->len, &lines, &len, &e);
    plugin_string_free(node);
    for (size_t i = 0; i < n; i++) {
        free((char *)matches[i].stream);
        free((char *)matches[i].text);
    }
    free(matches);
    return ns__out_part(out, len, &e, ret, err);
}
