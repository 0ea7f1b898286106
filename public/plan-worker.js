// Runs the planner off the page's thread (frontend/planner: the shared crate's evaluation in its
// own wasm, fetched by the Plan page only). One message in: {id, task, scenario}, task
// "evaluate" (the default) or "suggest" (quota suggestion); one out: {id, outcome, ms}, or
// {id, failed} when the planner itself broke.
import init, { evaluate_scenario, suggest_quotas } from "/pkg/planner.js";

const ready = init({ module_or_path: "/pkg/planner_bg.wasm" });
const tasks = { evaluate: evaluate_scenario, suggest: suggest_quotas };

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
