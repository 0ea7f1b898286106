// Runs the planner off the page's thread (frontend/planner: the shared crate's evaluation in its
// own wasm, fetched by the Plan page and the review of a quota request only). One message in:
// {id, task, scenario}, task "evaluate" (the default), "suggest" (quota suggestion),
// "what_if_before" or "what_if_after" (one side of a quota request's what-if, `scenario`
// holding its input: public/planner-client.js asks two workers, one side each); one out:
// {id, outcome, ms}, or {id, failed} when the planner itself broke.
import init, { evaluate_scenario, suggest_quotas, replay_what_if_side } from "/pkg/planner.js";

const ready = init({ module_or_path: "/pkg/planner_bg.wasm" });
const tasks = {
  evaluate: evaluate_scenario,
  suggest: suggest_quotas,
  what_if_before: (input) => replay_what_if_side(input, false),
  what_if_after: (input) => replay_what_if_side(input, true),
};

self.onmessage = async (event) => {
  const { id, task, scenario } = event.data;
  try {
    await ready;
    const run = tasks[task ?? "evaluate"];
    if (!run) throw new Error(`unknown task ${task}`);
    const started = performance.now();
    const outcome = run(scenario);
    self.postMessage({ id, outcome, ms: performance.now() - started });
  } catch (err) {
    self.postMessage({ id, failed: String(err) });
  }
};
