// Values and names as error messages show them: one line of printable ASCII, quoted, cut. Pure.

/** A value for an error message: quoted, escaped to printable ASCII, and cut at `max` characters. Never more than one line. */
export function show(value: string, max = 60): string {
    const cut = value.length > max;
    let out = "";
    for (const ch of cut ? value.slice(0, max) : value) {
        const c = ch.codePointAt(0)!;
        if (ch === '"' || ch === "\\") out += "\\" + ch;
        else if (c >= 0x20 && c < 0x7f) out += ch;
        else if (ch === "\n") out += "\\n";
        else if (ch === "\t") out += "\\t";
        else if (ch === "\r") out += "\\r";
        else out += c > 0xffff ? `\\u{${c.toString(16)}}` : `\\u${c.toString(16).padStart(4, "0")}`;
    }
    return cut ? `"${out}…" (${value.length} characters)` : `"${out}"`;
}

/** A key or option name as written in a message: bare when it is plain, else shown escaped. */
export function plain(s: string): string {
    return /^[A-Za-z0-9_.:+-]{1,64}$/.test(s) ? s : show(s, 40);
}

/** A JSON value for an error message: a string as show() writes it, anything else as its JSON text, escaped and cut. */
export function showJson(value: unknown, max = 60): string {
    if (typeof value === "string") return show(value, max);
    const text = JSON.stringify(value) ?? String(value);
    const shown = show(text, max);
    return text.length > max ? shown : shown.slice(1, -1);
}
