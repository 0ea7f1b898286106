// What `wasm-opt -Oz --strip-debug --strip-producers` (./dev's wasm_opt) does to a module, for
// many modules in one process. binaryen's npm build is itself WebAssembly, which Node compiles
// afresh each time wasm-opt starts (~0.5 s of CPU before it reads a byte): the console's ~90
// chunks paid that ~90 times; here each process pays it once.
//
//   node frontend/optimize-chunks.mjs OUT_DIR IN.wasm...   (writes OUT_DIR/<name of IN>.wasm)
import binaryen from "binaryen";
import { readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";

const [outDir, ...inputs] = process.argv.slice(2);
const { Features } = binaryen;
// The features rustc's output uses (./dev's wasm_opt enables the same).
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
  module.optimize();
  module.runPasses(["strip-debug", "strip-producers"]);
  writeFileSync(join(outDir, basename(input)), module.emitBinary());
  module.dispose();
}
