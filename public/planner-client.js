// The planner's worker for a page that asks it once (the console's review of a quota request),
// added by the console the first time it is needed: window.gpufleetPlanner.ask(task, input)
// starts public/plan-worker.js, posts the one task in its protocol ({id, task, scenario}) and
// resolves to the worker's answer ({id, outcome, ms}, or {id, failed}), then ends the worker.
window.gpufleetPlanner = {
  ask(task, input) {
    return new Promise((resolve) => {
      const worker = new Worker("/plan-worker.js", { type: "module" });
      const answer = (data) => {
        worker.terminate();
        resolve(data);
      };
      worker.onmessage = (event) => answer(event.data);
      worker.onerror = (event) => answer({ id: 0, failed: event.message || "it did not load" });
      worker.postMessage({ id: 0, task, scenario: input });
    });
  },
};
