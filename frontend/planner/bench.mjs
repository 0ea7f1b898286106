// The planner's worker timed in V8 (Node.js), the engine of the browsers we test in, on the
// built bundle (./dev build): node frontend/planner/bench.mjs TASK INPUT [BUNDLE_DIR]
//   TASK   evaluate | suggest | what_if (the tasks of public/plan-worker.js)
//   INPUT  the task's JSON: a scenario (shared/scenarios/bank-10000.json), a suggestion request,
//          or a what-if input (target/bench/what-if-input.json, written by
//          `cargo bench -p gpufleet-shared --bench planning -- what_if`)
// Prints the median, fastest and slowest of 7 runs, after one that also checks the answer. A
// what-if is timed as public/planner-client.js runs it, its two sides at once in two threads
// (each loading the bundle once, before the runs), and each side alone in this thread.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";

const [task, input, dir = "public/pkg"] = process.argv.slice(2);
const exports = { evaluate: ["evaluate_scenario"], suggest: ["suggest_quotas"], what_if: ["before", "after"] }[task];
if (!exports || !input) {
  console.error("usage: node frontend/planner/bench.mjs evaluate|suggest|what_if INPUT [BUNDLE_DIR]");
  process.exit(2);
}
const planner = await import(resolve(dir, "planner.js"));
planner.initSync({ module: readFileSync(resolve(dir, "planner_bg.wasm")) });
const json = readFileSync(input, "utf8");
const call = (name, text) =>
  task === "what_if" ? planner.replay_what_if_side(text, name === "after") : planner[name](text);

async function time(label, run) {
  const answer = await run();
  if (!answer.startsWith('{"Ok"')) {
    console.error(`the planner refused the input: ${answer.slice(0, 300)}`);
    process.exit(1);
  }
  const times = [];
  for (let i = 0; i < 7; i++) {
    const started = performance.now();
    await run();
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const ms = (t) => `${t.toFixed(0)} ms`;
  console.log(`${label} ${input}: median ${ms(times[3])} (${ms(times[0])}-${ms(times[6])}), ${json.length} bytes in`);
}

// A thread that loads the bundle and answers each side it is posted.
function side(name) {
  const source = `
    import { parentPort, workerData } from "node:worker_threads";
    import { readFileSync } from "node:fs";
    const planner = await import(workerData.js);
    planner.initSync({ module: readFileSync(workerData.wasm) });
    parentPort.on("message", (text) => parentPort.postMessage(planner.replay_what_if_side(text, ${name === "after"})));
    parentPort.postMessage("ready");`;
  const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(source)}`), {
    workerData: { js: pathToFileURL(resolve(dir, "planner.js")).href, wasm: resolve(dir, "planner_bg.wasm") },
  });
  const next = () => new Promise((done) => worker.once("message", done));
  const ready = next();
  return { ready, ask: (text) => (worker.postMessage(text), next()), end: () => worker.terminate() };
}

if (task === "what_if") {
  const sides = [side("before"), side("after")];
  await Promise.all(sides.map((s) => s.ready));
  await time("what_if, its two sides at once in two threads", async () => {
    const [before] = await Promise.all(sides.map((s) => s.ask(json)));
    return before;
  });
  sides.forEach((s) => s.end());
}
for (const name of exports) await time(task === "what_if" ? `what_if, the ${name} side alone` : task, () => call(name, json));
