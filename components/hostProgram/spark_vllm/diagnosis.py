# Root-cause finding in vLLM logs: the Python twin of components/knowledge/diagnosis.ts, driven by
# the same catalog and line syntax (data()["diagnosis"]). tests/unit/knowledge/diagnosis.test.ts
# checks that both give the same answers on every fixture log.
import re

from spark_vllm.data import data

_cache = []


def _rules():
    """The compiled catalog, compiled once per data object."""
    d = data()["diagnosis"]
    if not _cache or _cache[0] is not d:
        s = d["syntax"]

        def compile_all(entry, key):
            flags = re.DOTALL | (re.IGNORECASE if entry.get("ignoreCase") else 0)
            return [re.compile(p, flags) for p in entry.get(key) or []]

        _cache[:] = [d, {
            "ansi": re.compile(s["ansi"]),
            "prefix": re.compile(s["prefix"], re.DOTALL),
            "repeated": re.compile(s["repeated"], re.DOTALL),
            "header": re.compile(s["header"], re.DOTALL),
            "exception": re.compile(s["exception"], re.DOTALL),
            "frame": re.compile(s["frame"], re.DOTALL),
            "entries": [(e, compile_all(e, "patterns"), compile_all(e, "consequencePatterns"), compile_all(e, "weakPatterns"),
                         compile_all(e, "requires"))
                        for e in d["catalog"]],
            "maxLineChars": d.get("maxLineChars"),
        }]
    return _cache[1]


def normalise_log(text):
    """The log as lines: no ANSI escapes, LF only, no process prefixes, no trailing blanks (indentation kept)."""
    r = _rules()
    cap = r["maxLineChars"]
    text = r["ansi"].sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    out = []
    for line in text.split("\n"):
        if cap is not None:
            line = line[:cap]
        m = r["prefix"].search(line)
        while m:
            line = line[m.end():]
            m = r["prefix"].search(line)
        out.append(r["repeated"].sub("", line, count=1).rstrip(" \t"))
    return out


def _message(line):
    return _rules()["header"].sub("", line.strip(" \t"), count=1).strip(" \t")


def _found(entry, line):
    return {"kind": entry["kind"], "line": line, "hint": entry["hint"]}


def _is_code(messages, i):
    frame, exception = _rules()["frame"], _rules()["exception"]
    if frame.search(messages[i]):
        return True
    return i > 0 and bool(frame.search(messages[i - 1])) and not exception.search(messages[i])


def diagnose(text):
    """{"kind", "line", "hint"} for the root cause of a failed vLLM log, or None."""
    r = _rules()
    messages = [_message(line) for line in normalise_log(text)]
    code = [_is_code(messages, i) for i in range(len(messages))]

    def evidenced(c):
        """An entry with `requires` applies only when some line of the log (traceback lines too) matches one of them."""
        return not c[4] or any(any(p.search(m) for p in c[4]) for m in messages)
    candidates = [c for c in r["entries"] if not c[0].get("wrapper") and evidenced(c)]
    # Causes, then consequences (a rank died, a collective failed), then weak patterns.
    for tier in (1, 2, 3):
        for i, m in enumerate(messages):
            if code[i]:
                continue
            for c in candidates:
                if any(p.search(m) for p in c[tier]):
                    return _found(c[0], m)
    wrapper = next(c for c in r["entries"] if c[0].get("wrapper"))

    def is_wrapper(m):
        return any(p.search(m) for p in wrapper[1])

    hits = [i for i, m in enumerate(messages) if not code[i] and is_wrapper(m)]
    if not hits:
        return None
    for i in range(hits[-1] - 1, -1, -1):
        if r["exception"].search(messages[i]) and not is_wrapper(messages[i]):
            return _found(wrapper[0], messages[i])
    return _found(wrapper[0], messages[hits[0]])


def context_around(text, line, before=10, after=4):
    """Normalised lines around the first line whose message is `line` (or that contains it); [] if absent."""
    lines = normalise_log(text)
    at = next((i for i, l in enumerate(lines) if _message(l) == line), -1)
    if at < 0:
        at = next((i for i, l in enumerate(lines) if line in l), -1)
    if at < 0:
        return []
    return lines[max(0, at - before):at + after + 1]
