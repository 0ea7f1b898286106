// Runs the planner off the page's thread (frontend/planner: the shared crate's evaluation in its
// own wasm, fetched by the Plan page and the review of a quota request only). One message in:
// {id, task, scenario}, task "evaluate" (the default), "suggest" (quota suggestion) or
// "what_if" (a quota request's what-if, `scenario` holding its input); one out:
// {id, outcome, ms}, or {id, failed} when the planner itself broke.
import init, { evaluate_scenario, suggest_quotas, replay_what_if } from "/pkg/planner.js";

const ready = init({ module_or_path: "/pkg/planner_bg.wasm" });
const tasks = { evaluate: evaluate_scenario, suggest: suggest_quotas, what_if: replay_what_if };

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
