// The one program executor of every GPU-class device: a scheduled kernel program becomes
// device buffers, built kernels and one recorded command list on a hal::Runtime, and a run
// replays it. What the devices used to repeat lives here once:
// - buffers: one allocation per root buffer (views share their target's), intermediates in one
//   arena where the runtime binds ranges (hal::Limits::arena_align), weights checked against
//   the graph and uploaded once with the constants;
// - generated kernels: rendered for the device's dialect (codegen/device_modules.h), with a
//   kernel's arguments packed into fewer bindings where it has more than the runtime allows;
// - native kernels: planned by the device's NativePlanner (the families of src/kernels/) into
//   commands on the same list, with the words they set checked after each run;
// - the launch list, run and run_into, and the stats the dispatch report reads.
#pragma once

#include <functional>
#include <memory>

#include "codegen/c_renderer.h"
#include "hal.h"
#include "rlx/device.h"
#include "rlx/kernel_ir.h"

namespace rlx::hal {

// What a native kernel family sees of the executable while it plans one node.
class NativeBuilder {
 public:
  virtual ~NativeBuilder() = default;
  virtual Runtime& runtime() = 0;
  // Where kernel-level buffer `b` (a node's input or output) lives.
  virtual BufferRange range(int b) const = 0;
  // Device memory the executable owns for as long as it lives: `bytes` (> 0), filled with
  // `init` when given; the error names `what`.
  virtual Expected<BufferRange> scratch(uint64_t bytes, const std::string& what, const void* init = nullptr) = 0;
  // Appends a command to the program's list (in the node's place in the step order).
  virtual void add(Command c) = 0;
  // A 32-bit word the node's kernels set: read after every run, and `check` turns a nonzero
  // value into the run's error.
  virtual void check_word(const BufferRange& word, std::function<Status(int32_t)> check) = 0;
};

// One family of native kernels as a device runs it (src/kernels/gpu_natives.h has the
// common ones; a device may add its own, such as cuBLAS calls): the ops it answers for, its
// claim of a node, and the commands of a claimed node.
struct NativeFamily {
  std::string name;
  std::function<bool(Op)> takes;
  std::function<Claim(const NodeDesc&)> claim;
  std::function<Status(NativeBuilder&, const kir::NativeKernel&)> plan;
};
// A device's native kernels: one family per op family it runs natively.
using NativeTable = std::vector<NativeFamily>;

// A device's claim through its table: the first family that takes the node's op decides; a
// node no family takes is answered by the first family (the device's general native kernel),
// whose refusal says what it runs; an empty table has no native kernels.
Claim claim_native(const NativeTable& table, const NodeDesc& n, std::string_view device);

// A device as the executor sees it besides its runtime.
struct Target {
  codegen::CTarget dialect = codegen::CTarget::opencl;  // generated kernels' language
  NativeTable natives;
};

// The executable of a scheduled, verified kernel program on `rt`, with `g`'s weights uploaded.
Expected<std::unique_ptr<Executable>> make_executable(std::shared_ptr<Runtime> rt, const Target& target,
                                                      kir::KernelProgram prog, const Graph& g);

// A GPU-class device on the device runtime layer: what every such Device is besides its claims
// of generated code. The device opens its runtime and sets its info and target in its
// constructor; native claims go through the target's native table, compile() through the one
// program executor.
class RuntimeDevice : public Device {
 public:
  const DeviceInfo& info() const override { return info_; }
  Claim claim_native(const NodeDesc& n) const override { return hal::claim_native(target_.natives, n, info_.name); }
  Expected<std::unique_ptr<Executable>> compile(const Graph& g, const CompileOptions& options) const override;

 protected:
  // Names the device (a GPU-class one) and keeps its runtime, or says why there is none (the
  // device is then listed as unavailable with that reason). Returns the runtime, or null.
  template <class R>
  std::shared_ptr<R> open(std::string name, Expected<std::shared_ptr<R>> rt) {
    info_.name = std::move(name);
    info_.kind = DeviceKind::gpu;
    info_.available = rt.has_value();
    if (!rt) {
      info_.reason = rt.status().message();
      return nullptr;
    }
    runtime_ = *rt;
    return *rt;
  }

  // What a device whose shading language computes in 32 bits (WGSL, HLSL) declares: every dtype
  // but f64 and c64, i64/u64 computed in 32 bits with range checks (a value past them fails the
  // run), f32 subnormals that may be flushed (both languages allow it). `natives` is its table.
  void declare_32_bit_shaders(codegen::CTarget dialect, NativeTable natives) {
    info_.dtypes = {DType::f32, DType::i32, DType::u32, DType::i64, DType::u64, DType::f16,
                    DType::bf16, DType::i16, DType::u16, DType::i8, DType::u8, DType::boolean};
    info_.flushes_subnormals = true;
    info_.int64_in_32_bits = true;
    target_ = {dialect, std::move(natives)};
  }

  DeviceInfo info_;
  std::shared_ptr<Runtime> runtime_;
  Target target_;
};

// The weight a graph binds to kernel-level buffer `b`, checked against the program's type: what
// every executor uploads or points at (the cpu's too).
Expected<const Tensor*> bound_weight(const Graph& g, const kir::Buffer& b);

// The stats every executor reports of its program (the cpu's too): kernel counts, the listing,
// and each step's kernel with the graph nodes fused into it.
void describe_program(const kir::KernelProgram& prog, ExecStats& stats);

// The NodeDesc of a native kernel (what claims and plans judge).
inline NodeDesc node_desc(const kir::NativeKernel& nk) { return {nk.op, nk.attrs, nk.input_types, nk.output_types, nk.name}; }

// A command that runs `fn` in queue order: library work the runtime cannot see into (a cuBLAS
// call, a device's own launch sequence), named `name` in errors and profiles.
inline Command call_command(std::string name, std::function<Status()> fn) {
  Command c;
  c.kind = Command::Kind::call;
  c.name = std::move(name);
  c.call = std::move(fn);
  return c;
}

// Schedules a legalized primitive graph (sched::schedule), applies the requested donations (a
// donated output shares its input's buffer) and verifies the program: what every runtime
// device runs, and what code-generation checks without a device (tests/cuda, tests/rocm) render.
Expected<kir::KernelProgram> schedule_program(const Graph& g, const CompileOptions& options);

// A device that answers the legalizer's two questions (`native`, `primitive`) as device `name`
// would, without its hardware: for checking code generation (tests/cuda/, tests/rocm/). It is
// listed as unavailable with `reason`, and compile() refuses with it.
std::shared_ptr<const Device> make_codegen_device(std::string name, std::string reason,
                                                  std::function<Claim(const NodeDesc&)> native,
                                                  std::function<Claim(const NodeDesc&)> primitive);

// schedule_program, then the program's executable on `rt`.
Expected<std::unique_ptr<Executable>> compile_program(std::shared_ptr<Runtime> rt, const Target& target, const Graph& g,
                                                      const CompileOptions& options);

}  // namespace rlx::hal
