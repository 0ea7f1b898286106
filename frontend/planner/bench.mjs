// The planner's worker timed in V8 (Node.js), the engine of the browsers we test in, on the
// built bundle (./dev build): node frontend/planner/bench.mjs TASK INPUT [BUNDLE_DIR]
//   TASK   evaluate | suggest | what_if (the functions public/plan-worker.js calls)
//   INPUT  the task's JSON: a scenario (shared/scenarios/bank-10000.json), a suggestion request,
//          or a what-if input (target/bench/what-if-input.json, written by
//          `cargo bench -p gpufleet-shared --bench planning -- what_if`)
// Prints the median, fastest and slowest of 7 runs, after one that also checks the answer.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

const [task, input, dir = "public/pkg"] = process.argv.slice(2);
const run = { evaluate: "evaluate_scenario", suggest: "suggest_quotas", what_if: "replay_what_if" }[task];
if (!run || !input) {
  console.error("usage: node frontend/planner/bench.mjs evaluate|suggest|what_if INPUT [BUNDLE_DIR]");
  process.exit(2);
}
const planner = await import(resolve(dir, "planner.js"));
planner.initSync({ module: readFileSync(resolve(dir, "planner_bg.wasm")) });
const json = readFileSync(input, "utf8");
const answer = planner[run](json);
if (!answer.startsWith('{"Ok"')) {
  console.error(`the planner refused the input: ${answer.slice(0, 300)}`);
  process.exit(1);
}
const times = [];
for (let i = 0; i < 7; i++) {
  const started = performance.now();
  planner[run](json);
  times.push(performance.now() - started);
}
times.sort((a, b) => a - b);
const ms = (t) => `${t.toFixed(0)} ms`;
console.log(`${task} ${input}: median ${ms(times[3])} (${ms(times[0])}-${ms(times[6])}), ${json.length} bytes in`);
