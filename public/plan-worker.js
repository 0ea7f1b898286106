// Runs the planner off the page's thread (frontend/planner: the shared crate's evaluation in its
// own wasm, fetched by the Plan page only). One message in: {id, scenario}; one out:
// {id, outcome, ms}, or {id, failed} when the planner itself broke.
import init, { evaluate_scenario } from "/pkg/planner.js";

const ready = init({ module_or_path: "/pkg/planner_bg.wasm" });

self.onmessage = async (event) => {
  const { id, scenario } = event.data;
  try {
    await ready;
    const started = performance.now();
    const outcome = evaluate_scenario(scenario);
    self.postMessage({ id, outcome, ms: performance.now() - started });
  } catch (err) {
    self.postMessage({ id, failed: String(err) });
  }
};
