"""The one way the figure scripts put a generated table into a document:
between a begin and an end marker, each once and in that order.
Used by matrix-table.py, nfd-compare.py, guests-figures.py, npd-figures.py
and events-figures.py (each puts this directory on sys.path to import it)."""


class MarkerError(Exception):
    pass


def splice(doc, begin, end, body, name="the document", error=MarkerError):
    """`doc` with `body` (its trailing newlines made one) between `begin`
    and `end`, each on a line of its own; a document without both markers,
    once each, in order, raises `error` (the calling script's own)."""
    if doc.count(begin) != 1 or doc.count(end) != 1 or doc.index(begin) > doc.index(end):
        raise error(f"{name} must hold {begin} once, then {end} once")
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    body = body.rstrip("\n")
    return f"{head}{begin}\n{body}\n{end}{tail}" if body else f"{head}{begin}\n{end}{tail}"
