// autopass's pass plugin: three jobs at the start of the optimization pipeline
// (PipelineStartEP, which every -O level runs, the ThinLTO and LTO pre-link pipelines
// too), each asked for separately and otherwise doing nothing:
//
//   save the IR   (record)  AUTOPASS_IR_OUT names a file: the module as the pipeline
//                           gets it is written there as bitcode.  Changes nothing, so
//                           the compile is the plain one, object byte for byte, and the
//                           front end runs once.  The file appears whole (written
//                           beside, then renamed) or not at all.
//   decisions     (apply, tune)  -mllvm -autopass-decision=KIND:FUNCTION:WHERE:HASH:PROP=N,
//                           once per decision (the plugin also loaded with -Xclang -load,
//                           so that clang knows the option): function attributes and
//                           loop metadata, what LLVM keeps through a full or thin LTO
//                           link.  A decision whose function, loop or call site is not
//                           there, or whose code changed (HASH), is not applied and said
//                           on stderr ("autopass-decision: not applied: ..."), never
//                           applied elsewhere.
//   inventory     (tune)    AUTOPASS_INVENTORY names a file: every defined function,
//                           its loops and its calls, keyed as decisions name them, with
//                           their hashes (and source locations where the IR has them).
//
// Keys: a function by its name (mangled), or "~" and a hash of the name when it is long;
// a loop by its path in the function's loop nest ("2.1": the first loop inside the
// second outermost one, loops ordered by where their header is in the function); a
// call site by its callee's key and "#n", the n-th call to it in the function.  HASH is
// a hash of the instructions of the loop, or of the function (a call's: its caller),
// as the pipeline gets them: opcodes, types, constants, callees; not names, metadata or
// debug locations, so a compile with or without debug information matches.
//
// Built by native_builds.py with the clang it serves (llvm-config's flags), beside the
// launcher; proven on a small unit before it is used (the object with it is the object
// without it).
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/InstrTypes.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <system_error>
#include <vector>

using namespace llvm;

namespace {

cl::list<std::string> DecisionOption(
    "autopass-decision", cl::ZeroOrMore,
    cl::desc("autopass: a tuned decision, KIND:FUNCTION:WHERE:HASH:PROP=N"));

const size_t LONG_NAME = 96;

uint64_t fnv(uint64_t hash, uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    hash ^= (value >> (8 * i)) & 0xff;
    hash *= 1099511628211ULL;
  }
  return hash;
}

uint64_t fnvText(StringRef text) {
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

std::string hex(uint64_t value, int digits) {
  std::string out;
  raw_string_ostream stream(out);
  stream << format_hex_no_prefix(value, digits);
  return stream.str().substr(0, digits);
}

std::string functionKey(StringRef name) {
  bool plain = name.size() <= LONG_NAME && !name.empty();
  for (char c : name)
    plain = plain && (isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$');
  return plain ? name.str() : "~" + hex(fnvText(name), 16);
}

// What a decision's HASH describes: the instructions, as the pipeline gets them.
uint64_t hashBlocks(ArrayRef<BasicBlock *> blocks) {
  uint64_t hash = 1469598103934665603ULL;
  hash = fnv(hash, blocks.size());
  for (BasicBlock *block : blocks) {
    for (Instruction &inst : *block) {
      if (isa<DbgInfoIntrinsic>(inst)) continue;
      hash = fnv(hash, inst.getOpcode());
      hash = fnv(hash, inst.getType()->getTypeID());
      hash = fnv(hash, inst.getNumOperands());
      for (Value *operand : inst.operands()) {
        if (auto *constant = dyn_cast<ConstantInt>(operand))
          hash = fnv(hash, constant->getValue().getLimitedValue());
        else if (auto *callee = dyn_cast<Function>(operand))
          hash = fnv(hash, fnvText(callee->getName()));
      }
    }
  }
  return hash;
}

std::string functionHash(Function &function) {
  SmallVector<BasicBlock *, 32> blocks;
  for (BasicBlock &block : function) blocks.push_back(&block);
  return hex(hashBlocks(blocks), 8);
}

std::string loopHash(Loop *loop) { return hex(hashBlocks(loop->getBlocks()), 8); }

// Loops by path: ordered by where their header lies in the function.
void nest(Function &function, ArrayRef<Loop *> loops, const std::string &prefix,
          std::vector<std::pair<std::string, Loop *>> &out) {
  DenseMap<const BasicBlock *, unsigned> order;
  unsigned index = 0;
  for (BasicBlock &block : function) order[&block] = index++;
  std::vector<Loop *> sorted(loops.begin(), loops.end());
  std::sort(sorted.begin(), sorted.end(), [&](Loop *a, Loop *b) {
    return order.lookup(a->getHeader()) < order.lookup(b->getHeader());
  });
  for (unsigned i = 0; i < sorted.size(); ++i) {
    std::string path = prefix + (prefix.empty() ? "" : ".") + std::to_string(i + 1);
    out.emplace_back(path, sorted[i]);
    nest(function, sorted[i]->getSubLoops(), path, out);
  }
}

std::vector<std::pair<std::string, Loop *>> loopsOf(Function &function, LoopInfo &info) {
  std::vector<std::pair<std::string, Loop *>> out;
  SmallVector<Loop *, 8> top(info.begin(), info.end());
  nest(function, top, "", out);
  return out;
}

// The n-th call site of each callee in the function ("callee#n", n from 1).
std::vector<std::pair<std::string, CallBase *>> callsOf(Function &function) {
  std::vector<std::pair<std::string, CallBase *>> out;
  std::map<std::string, unsigned> seen;
  for (BasicBlock &block : function)
    for (Instruction &inst : block)
      if (auto *call = dyn_cast<CallBase>(&inst))
        if (Function *callee = call->getCalledFunction())
          if (!callee->isIntrinsic()) {
            std::string key = functionKey(callee->getName());
            out.emplace_back(key + "#" + std::to_string(++seen[key]), call);
          }
  return out;
}

std::string where(const DebugLoc &location) {
  if (!location) return "";
  return (location->getFilename() + ":" + Twine(location.getLine()) + ":" +
          Twine(location.getCol())).str();
}

struct Decision {
  std::string token, kind, function, place, hash, property;
  unsigned value = 0;
};

bool parse(const std::string &token, Decision &out) {
  SmallVector<StringRef, 6> parts;
  StringRef(token).split(parts, ':');
  if (parts.size() != 5) return false;
  auto [property, value] = parts[4].split('=');
  if (value.getAsInteger(10, out.value)) return false;
  out.token = token;
  out.kind = parts[0].str();
  out.function = parts[1].str();
  out.place = parts[2].str();
  out.hash = parts[3].str();
  out.property = property.str();
  return true;
}

void said(const std::string &token, const std::string &why) {
  errs() << "autopass-decision: not applied: " << token << " (" << why << ")\n";
}

// -- function attributes ----------------------------------------------------------------
bool applyAttribute(Function &function, const Decision &d) {
  if (function.hasFnAttribute(Attribute::OptimizeNone)) {
    said(d.token, "the function is optnone");
    return false;
  }
  const std::map<std::string, std::pair<Attribute::AttrKind, Attribute::AttrKind>> attributes = {
      {"noinline", {Attribute::NoInline, Attribute::AlwaysInline}},
      {"alwaysinline", {Attribute::AlwaysInline, Attribute::NoInline}},
      {"cold", {Attribute::Cold, Attribute::Hot}},
      {"hot", {Attribute::Hot, Attribute::Cold}},
      {"minsize", {Attribute::MinSize, Attribute::None}},
      {"optsize", {Attribute::OptimizeForSize, Attribute::None}},
  };
  auto found = attributes.find(d.property);
  if (found == attributes.end() || d.value != 1) {
    said(d.token, "unknown function decision");
    return false;
  }
  if (found->second.second != Attribute::None) function.removeFnAttr(found->second.second);
  function.addFnAttr(found->second.first);
  if (d.property == "minsize") function.addFnAttr(Attribute::OptimizeForSize);
  return true;
}

bool applyCall(CallBase &call, const Decision &d) {
  if (d.value != 1 || (d.property != "noinline" && d.property != "alwaysinline")) {
    said(d.token, "unknown call decision");
    return false;
  }
  bool never = d.property == "noinline";
  call.removeFnAttr(never ? Attribute::AlwaysInline : Attribute::NoInline);
  call.addFnAttr(never ? Attribute::NoInline : Attribute::AlwaysInline);
  return true;
}

// -- loop metadata ------------------------------------------------------------------------
// property -> (metadata name, whether it carries a value: i32, or i1 for *.enable)
const std::map<std::string, std::string> LOOP_PROPERTIES = {
    {"vectorize.width", "llvm.loop.vectorize.width"},
    {"vectorize.enable", "llvm.loop.vectorize.enable"},
    {"interleave.count", "llvm.loop.interleave.count"},
    {"unroll.count", "llvm.loop.unroll.count"},
    {"unroll.disable", "llvm.loop.unroll.disable"},
    {"unroll.full", "llvm.loop.unroll.full"},
    {"distribute.enable", "llvm.loop.distribute.enable"},
    {"licm_versioning.disable", "llvm.loop.licm_versioning.disable"},
};

bool applyLoop(Loop *loop, ArrayRef<const Decision *> decisions) {
  LLVMContext &context = loop->getHeader()->getContext();
  std::map<std::string, Metadata *> ours;
  for (const Decision *d : decisions) {
    auto found = LOOP_PROPERTIES.find(d->property);
    if (found == LOOP_PROPERTIES.end()) {
      said(d->token, "unknown loop decision");
      continue;
    }
    const std::string &name = found->second;
    SmallVector<Metadata *, 2> operands = {MDString::get(context, name)};
    bool flag = StringRef(name).ends_with(".enable");
    bool bare = StringRef(name).ends_with(".disable") || StringRef(name).ends_with(".full");
    if (flag)
      operands.push_back(ConstantAsMetadata::get(
          ConstantInt::get(Type::getInt1Ty(context), d->value != 0)));
    else if (!bare)
      operands.push_back(ConstantAsMetadata::get(
          ConstantInt::get(Type::getInt32Ty(context), d->value)));
    ours[name] = MDNode::get(context, operands);
  }
  if (ours.empty()) return false;
  SmallVector<Metadata *, 8> operands = {nullptr};
  if (MDNode *old = loop->getLoopID())
    for (unsigned i = 1; i < old->getNumOperands(); ++i) {
      auto *property = dyn_cast<MDNode>(old->getOperand(i));
      auto *name = property && property->getNumOperands()
                       ? dyn_cast<MDString>(property->getOperand(0)) : nullptr;
      if (!name || !ours.count(name->getString().str()))
        operands.push_back(old->getOperand(i));
    }
  for (auto &entry : ours) operands.push_back(entry.second);
  MDNode *id = MDNode::getDistinct(context, operands);
  id->replaceOperandWith(0, id);
  loop->setLoopID(id);
  return true;
}

struct Decide : PassInfoMixin<Decide> {
  PreservedAnalyses run(Module &module, ModuleAnalysisManager &modules) {
    if (DecisionOption.empty()) return PreservedAnalyses::all();
    std::map<std::string, std::vector<Decision>> byFunction;
    for (const std::string &token : DecisionOption) {
      Decision d;
      if (!parse(token, d)) {
        said(token, "not a decision autopass writes");
        continue;
      }
      byFunction[d.function].push_back(d);
    }
    StringMap<Function *> functions;
    for (Function &function : module)
      if (!function.isDeclaration()) functions[functionKey(function.getName())] = &function;
    auto &analyses =
        modules.getResult<FunctionAnalysisManagerModuleProxy>(module).getManager();
    bool changed = false;
    for (auto &[key, decisions] : byFunction) {
      Function *function = functions.lookup(key);
      if (!function) {
        for (const Decision &d : decisions) said(d.token, "no such function in this unit");
        continue;
      }
      std::string hash = functionHash(*function);
      auto loops = loopsOf(*function, analyses.getResult<LoopAnalysis>(*function));
      auto calls = callsOf(*function);
      std::map<std::string, std::vector<const Decision *>> byLoop;
      for (const Decision &d : decisions) {
        if (d.kind == "fn") {
          if (d.hash != hash) said(d.token, "the function changed since it was tuned");
          else changed |= applyAttribute(*function, d);
        } else if (d.kind == "call") {
          auto call = std::find_if(calls.begin(), calls.end(),
                                   [&](auto &c) { return c.first == d.place; });
          if (d.hash != hash) said(d.token, "the caller changed since it was tuned");
          else if (call == calls.end()) said(d.token, "no such call in the function");
          else changed |= applyCall(*call->second, d);
        } else if (d.kind == "loop") {
          auto loop = std::find_if(loops.begin(), loops.end(),
                                   [&](auto &l) { return l.first == d.place; });
          if (loop == loops.end()) said(d.token, "no such loop in the function");
          else if (loopHash(loop->second) != d.hash)
            said(d.token, "the loop changed since it was tuned");
          else byLoop[d.place].push_back(&d);
        } else {
          said(d.token, "not a decision autopass writes");
        }
      }
      for (auto &entry : byLoop) {
        const std::string &path = entry.first;
        Loop *loop = std::find_if(loops.begin(), loops.end(),
                                  [&](auto &l) { return l.first == path; })->second;
        changed |= applyLoop(loop, entry.second);
      }
    }
    return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
  static bool isRequired() { return true; }
};

// -- inventory ----------------------------------------------------------------------------
struct Inventory : PassInfoMixin<Inventory> {
  PreservedAnalyses run(Module &module, ModuleAnalysisManager &modules) {
    const char *path = std::getenv("AUTOPASS_INVENTORY");
    if (!path || !*path) return PreservedAnalyses::all();
    auto &analyses =
        modules.getResult<FunctionAnalysisManagerModuleProxy>(module).getManager();
    std::string part = std::string(path) + ".part";
    std::error_code error;
    {
      raw_fd_ostream out(part, error, sys::fs::OF_None);
      if (error) return PreservedAnalyses::all();
      for (Function &function : module) {
        if (function.isDeclaration()) continue;
        std::string key = functionKey(function.getName());
        std::string hash = functionHash(function);
        unsigned size = 0;
        for (BasicBlock &block : function) size += block.size();
        auto loops = loopsOf(function, analyses.getResult<LoopAnalysis>(function));
        out << "fn\t" << key << "\t" << hash << "\t" << function.getName() << "\t"
            << loops.size() << "\t" << size << "\t"
            << (function.getSubprogram() ? (function.getSubprogram()->getFilename() + ":" +
                                            Twine(function.getSubprogram()->getLine())).str()
                                         : "")
            << "\n";
        for (auto &[place, loop] : loops) {
          unsigned instructions = 0;
          for (BasicBlock *block : loop->getBlocks()) instructions += block->size();
          out << "loop\t" << key << "\t" << place << "\t" << loopHash(loop) << "\t"
              << loop->getLoopDepth() << "\t" << (loop->isInnermost() ? 1 : 0) << "\t"
              << loop->getNumBlocks() << "\t" << instructions << "\t"
              << where(loop->getStartLoc()) << "\n";
        }
        for (auto &[place, call] : callsOf(function))
          out << "call\t" << key << "\t" << place << "\t" << hash << "\t"
              << call->getCalledFunction()->getName() << "\n";
      }
      out.close();
      if (out.has_error()) {
        out.clear_error();
        error = std::make_error_code(std::errc::io_error);
      }
    }
    if (error || sys::fs::rename(part, path)) sys::fs::remove(part);
    return PreservedAnalyses::all();
  }
  static bool isRequired() { return true; }
};

// -- saving the IR ------------------------------------------------------------------------
struct SaveIR : PassInfoMixin<SaveIR> {
  PreservedAnalyses run(Module &module, ModuleAnalysisManager &) {
    const char *path = std::getenv("AUTOPASS_IR_OUT");
    if (path && *path) {
      std::string part = std::string(path) + ".part";
      std::error_code error;
      {
        raw_fd_ostream out(part, error, sys::fs::OF_None);
        if (!error) {
          WriteBitcodeToFile(module, out);
          out.close();
          if (out.has_error()) {
            out.clear_error();                     // never an error of the compile
            error = std::make_error_code(std::errc::io_error);
          }
        }
      }
      if (error || sys::fs::rename(part, path)) sys::fs::remove(part);
    }
    return PreservedAnalyses::all();
  }
  static bool isRequired() { return true; }      // -O0 and optnone functions too
};

}  // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "autopass", "2", [](PassBuilder &builder) {
            builder.registerPipelineStartEPCallback(
                [](ModulePassManager &passes, OptimizationLevel) {
                  passes.addPass(SaveIR());       // the IR as recorded, before anything
                  passes.addPass(Inventory());
                  passes.addPass(Decide());
                });
          }};
}
