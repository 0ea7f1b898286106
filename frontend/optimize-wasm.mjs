// The build's size optimisation: what `wasm-opt -Oz --strip-debug --strip-producers` (with
// `--converge` when asked) does, byte for byte, through binaryen's JS API, for many modules in
// one process. binaryen's npm build is itself WebAssembly, which Node compiles afresh each time
// the `wasm-opt` command starts (~0.5 s of CPU before it reads a byte): the console's ~90
// chunks paid that ~90 times; here each process pays it once. (Debian's binaryen 108 breaks
// the wasm: only ever the npm one.)
//
//   node frontend/optimize-wasm.mjs [--converge] OUT_DIR IN.wasm...
//     writes OUT_DIR/<name of IN>.wasm; --converge repeats the passes while the binary shrinks
import binaryen from "binaryen";
import { readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";

const args = process.argv.slice(2);
const converge = args[0] === "--converge";
const [outDir, ...inputs] = converge ? args.slice(1) : args;
const { Features } = binaryen;
// The features rustc's output uses.
const features =
  Features.MutableGlobals | Features.NontrappingFPToInt | Features.BulkMemory | Features.BulkMemoryOpt |
  Features.SignExt | Features.ReferenceTypes | Features.CallIndirectOverlong | Features.Multivalue;
// -Oz: the default optimisation passes at -O2, shrinking as much as they can, and, as the
// command line does when it optimises, the binary written through optimised Stack IR.
binaryen.setOptimizeLevel(2);
binaryen.setShrinkLevel(2);
binaryen.setGenerateStackIR(true);
binaryen.setOptimizeStackIR(true);
for (const input of inputs) {
  const module = binaryen.readBinary(readFileSync(input));
  module.setFeatures(features);
  let binary = optimized(module);
  // As the command line's --converge: the passes again while the binary shrinks, keeping the
  // last run's output.
  for (let again = converge; again; ) {
    const next = optimized(module);
    again = next.length < binary.length;
    binary = next;
  }
  writeFileSync(join(outDir, basename(input)), binary);
  module.dispose();
}

function optimized(module) {
  module.optimize();
  module.runPasses(["strip-debug", "strip-producers"]);
  return module.emitBinary();
}
