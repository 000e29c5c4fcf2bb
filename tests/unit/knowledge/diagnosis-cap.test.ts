// Diagnosis in linear time (issue 13): lines are cut at maxLineChars before any pattern sees them.
// The 2 MB timing is a benchmark (`npm run bench -- --only diagnose`, bench/diagnose.ts), not a test.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { diagnose, diagnosisData, maxLineChars, normaliseLog } from "../../../components/knowledge/diagnosis";

test("the matcher sees only the first maxLineChars characters of a line, counted as Python counts them", () => {
    assert.equal(diagnosisData().maxLineChars, maxLineChars, "the Python twin gets the same cap");
    const cause = "RuntimeError: CUDA error: out of memory";
    assert.equal(diagnose(cause)?.kind, "cuda-oom");
    // The cause past the cap is not seen; the line comes back cut.
    const late = "x".repeat(maxLineChars) + cause;
    assert.equal(diagnose(late), undefined);
    assert.deepEqual(normaliseLog(late), ["x".repeat(maxLineChars)]);
    // Within the cap it is, and the root-cause line is cut too.
    const early = cause + " " + "y".repeat(3 * maxLineChars);
    assert.equal(diagnose(early)?.kind, "cuda-oom");
    assert.equal(diagnose(early)?.line.length, maxLineChars);
    // Code points, not UTF-16 units: an astral character counts once, as in Python's line[:n].
    const astral = "😀".repeat(maxLineChars + 5);
    assert.equal([...normaliseLog(astral)[0]].length, maxLineChars);
    // Trailing blanks go without a regex (a run of blanks no longer costs its square).
    assert.deepEqual(normaliseLog("a" + " ".repeat(10) + "\tb  \t "), ["a          \tb"]);
    // ANSI OSC sequences end at BEL or ESC \ within one line; an unterminated one does not eat later lines.
    assert.deepEqual(normaliseLog("\x1b]0;title\x07a\n\x1b]2;t\x1b\\b\n\x1b]unterminated\nValueError: No available memory for the cache blocks."),
        ["a", "b", "unterminated", "ValueError: No available memory for the cache blocks."]);
});
