// `sudo npm run demo`: the whole job on simulated Sparks in one command (issue 20). See scripts/demo/session.ts.
import { USAGE, parseDemoArgs } from "./demo/options";
import { dpkgQuery, prerequisiteProblems } from "./demo/prereqs";
import { downDemo } from "./demo/kept";
import { runDemo } from "./demo/session";

async function main(): Promise<number> {
    const opts = parseDemoArgs(process.argv.slice(2));
    if ("error" in opts) {
        console.error(`${opts.error}\n${USAGE}`);
        return 2;
    }
    const problems = prerequisiteProblems(process.getuid?.(), dpkgQuery);
    if (problems.length) {
        problems.forEach(p => console.error(p));
        return 1;
    }
    const print = (line = "") => console.log(line);
    return opts.down ? downDemo(print) : runDemo(opts, print);
}

main().then(code => process.exit(code), e => {
    console.error(e instanceof Error ? e.stack : String(e));
    process.exit(1);
});
