// autopass's record-mode pass plugin: the unit's IR as the optimization pipeline gets it.
//
// `autopass record` adds -fpass-plugin=<this library> to a compile and names a file in
// AUTOPASS_IR_OUT; at the start of the pipeline (PipelineStartEP, which every -O level
// runs, the ThinLTO and LTO pre-link pipelines too) this pass writes the module there as
// bitcode, changes nothing and invalidates nothing.  So the compile is the plain one,
// object byte for byte, and the front end runs once: before, record ran it a second
// time to emit the same IR (-Xclang -disable-llvm-passes -emit-llvm).
//
// The file appears whole (written beside, then renamed) or not at all, and a write that
// fails leaves the compile as it was: the wrapper then records the unit as not captured.  Built by build_env.py with the clang
// it serves (llvm-config's flags), beside the launcher.
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <string>
#include <system_error>

namespace {

struct SaveIR : llvm::PassInfoMixin<SaveIR> {
  llvm::PreservedAnalyses run(llvm::Module &module, llvm::ModuleAnalysisManager &) {
    const char *path = std::getenv("AUTOPASS_IR_OUT");
    if (path && *path) {
      std::string part = std::string(path) + ".part";
      std::error_code error;
      {
        llvm::raw_fd_ostream out(part, error, llvm::sys::fs::OF_None);
        if (!error) {
          llvm::WriteBitcodeToFile(module, out);
          out.close();
          if (out.has_error()) {
            out.clear_error();                     // never an error of the compile
            error = std::make_error_code(std::errc::io_error);
          }
        }
      }
      if (error || llvm::sys::fs::rename(part, path)) llvm::sys::fs::remove(part);
    }
    return llvm::PreservedAnalyses::all();
  }
  static bool isRequired() { return true; }      // -O0 and optnone functions too
};

}  // namespace

extern "C" LLVM_ATTRIBUTE_WEAK llvm::PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "autopass-save-ir", "1", [](llvm::PassBuilder &builder) {
            builder.registerPipelineStartEPCallback(
                [](llvm::ModulePassManager &passes, llvm::OptimizationLevel) {
                  passes.addPass(SaveIR());
                });
          }};
}
