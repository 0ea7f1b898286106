// The planner's worker for a page that asks it once (the console's review of a quota request),
// added by the console when it starts fetching the what-if's input: window.gpufleetPlanner.ask(
// task, input) resolves to the answer of public/plan-worker.js's protocol ({id, outcome, ms},
// or {id, failed}), each worker ended once it has answered. Two workers start as this script
// loads, so they load the planner while the page waits for the input; an ask takes them first.
//
// Task "what_if" (a quota request's what-if) runs as two tasks at once, in two workers: the
// weeks replayed before the approval in one and after it in the other (whole simulations of
// their own, the two halves of the work), joined here team by team as the shared crate's
// `Replayed::join` joins them for the server. Its `ms` is the wall time from the two posts to
// the joined answer (whatever of the workers' start was not done by then included).
const started = [];
const start = () => new Worker("/plan-worker.js", { type: "module" });
started.push(start(), start());

function once(task, input) {
  const worker = started.pop() ?? start();
  return new Promise((resolve) => {
    const answer = (data) => {
      worker.terminate();
      resolve(data);
    };
    worker.onmessage = (event) => answer(event.data);
    worker.onerror = (event) => answer({ id: 0, failed: event.message || "it did not load" });
    worker.postMessage({ id: 0, task, scenario: input });
  });
}

// Outcome<SideReplayed> twice (JSON) → Outcome<Replayed> (JSON): the first refusal, or each
// team's [name, outcome] pairs of the two sides as {team, before, after}; the sides replay the
// same weeks, so the problems are the first side's.
function join(before, after) {
  const [b, a] = [JSON.parse(before), JSON.parse(after)];
  if (!b.Ok) return before;
  if (!a.Ok) return after;
  const teams = b.Ok.teams.map(([team, outcome], t) => ({ team, before: outcome, after: a.Ok.teams[t][1] }));
  return JSON.stringify({ Ok: { teams, problems: b.Ok.problems } });
}

window.gpufleetPlanner = {
  async ask(task, input) {
    if (task !== "what_if") return once(task, input);
    const posted = performance.now();
    const [before, after] = await Promise.all([once("what_if_before", input), once("what_if_after", input)]);
    if (before.failed || after.failed) return before.failed ? before : after;
    return { id: 0, outcome: join(before.outcome, after.outcome), ms: performance.now() - posted };
  },
};
