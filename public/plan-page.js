// Loads the Plan page's own bundle (frontend/plan: the managers' wizard), added by the console
// the first time someone opens Plan. Its wasm instantiates after the script's load event, so
// it says when it is ready: window.gpufleetPlan = { mount }, then a "gpufleet-plan-ready"
// event; a failure is thrown (the console shows it on the page).
import init, { mount } from "/pkg/plan.js";

try {
  await init({ module_or_path: "/pkg/plan_bg.wasm" });
  window.gpufleetPlan = { mount };
  window.dispatchEvent(new Event("gpufleet-plan-ready"));
} catch (err) {
  window.gpufleetPlanFailed = String(err);
  window.dispatchEvent(new Event("gpufleet-plan-ready"));
}
