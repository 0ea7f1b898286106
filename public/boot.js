// Starts the console. A file rather than an inline script, so the Content-Security-Policy can
// allow scripts from this origin only.
import init from "/pkg/gpufleet.js";
init({ module_or_path: "/pkg/gpufleet_bg.wasm" }).catch((err) => {
  const p = document.createElement("p");
  p.className = "error";
  p.textContent = "The console failed to start: " + err;
  document.body.replaceChildren(p);
});
