#include "program_executable.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "codegen/device_modules.h"
#include "passes/schedule.h"
#include "rlx/compile_options.h"

namespace rlx::hal {
namespace {

uint64_t words(uint64_t bytes) { return (bytes + 3) / 4 * 4; }

class ProgramExecutable final : public Executable, NativeBuilder {
 public:
  ProgramExecutable(std::shared_ptr<Runtime> rt, Target target, kir::KernelProgram prog)
      : rt_(std::move(rt)), target_(std::move(target)), prog_(std::move(prog)) {}
  ~ProgramExecutable() override {
    recording_.reset();  // before the buffers it names
    for (Buffer b : owned_) rt_->release(b);
  }
  Status init(const Graph& g);
  Expected<std::vector<Tensor>> run(std::span<const Tensor> inputs) override;
  Status run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) override;
  const ExecStats& stats() const override { return stats_; }

  // NativeBuilder
  Runtime& runtime() override { return *rt_; }
  BufferRange range(int b) const override { return range_[root(b)]; }
  Expected<BufferRange> scratch(uint64_t bytes, const std::string& what, const void* init) override;
  void add(Command c) override { list_.commands.push_back(std::move(c)); }
  void check_word(const BufferRange& word, std::function<Status(int32_t)> check) override {
    checks_.push_back({word, std::move(check)});
  }

 private:
  int root(int b) const {
    while (prog_.buffers[b].alias_of >= 0) b = prog_.buffers[b].alias_of;
    return b;
  }
  Status create_buffers(const Graph& g);
  Expected<std::vector<codegen::GlslArgPlace>> place_arguments(const kir::GeneratedKernel& k,
                                                               std::vector<BufferRange>& bindings, int max_bindings);
  Expected<BufferRange> range_check_word();
  Status build_generated(std::vector<Kernel>& kernels, std::vector<std::vector<BufferRange>>& bindings);
  Status build_commands();
  std::string device() const { return std::string(rt_->name()); }

  struct Check {
    BufferRange word;
    std::function<Status(int32_t)> check;
  };
  std::shared_ptr<Runtime> rt_;
  Target target_;
  kir::KernelProgram prog_;
  std::vector<BufferRange> range_;  // per kernel-level buffer (a view: its root's)
  std::vector<int64_t> arena_off_;  // byte offset of an intermediate in the arena; -1: its own buffer
  BufferRange arena_;
  BufferRange range_word_;  // see range_check_word()
  std::vector<Buffer> owned_;
  CommandList list_;
  std::vector<Check> checks_;
  std::vector<int32_t> check_values_;
  std::unique_ptr<Recording> recording_;
  ExecStats stats_;
  std::mutex mu_;
};

Expected<BufferRange> ProgramExecutable::scratch(uint64_t bytes, const std::string& what, const void* init) {
  RLX_ASSIGN_OR_RETURN(Buffer b, rt_->allocate(words(std::max<uint64_t>(bytes, 1)), what));
  owned_.push_back(b);
  const BufferRange r{b, 0, words(std::max<uint64_t>(bytes, 1))};
  if (init && bytes) RLX_TRY(rt_->upload(r, init, bytes));
  return r;
}

// One allocation per root buffer, at least one 32-bit word and whole words (8/16-bit dtypes
// may be read and written as packed words; no API allocates nothing). Intermediates share the
// arena at the memory planner's offsets where the runtime binds ranges there.
Status ProgramExecutable::create_buffers(const Graph& g) {
  const size_t nb = prog_.buffers.size();
  const Limits& lim = rt_->limits();
  range_.assign(nb, BufferRange{});
  arena_off_.assign(nb, -1);
  if (lim.arena_align > 0) {
    for (size_t i = 0; i < nb; ++i) {
      const kir::Buffer& b = prog_.buffers[i];
      const int64_t bytes = static_cast<int64_t>(b.bytes());
      if (b.alias_of >= 0 || b.kind != kir::BufferKind::intermediate || bytes == 0 || b.arena_offset < 0 ||
          b.arena_offset % lim.arena_align != 0 || b.arena_offset + bytes > static_cast<int64_t>(prog_.arena_bytes) ||
          bytes > lim.max_binding_bytes)
        continue;
      arena_off_[i] = b.arena_offset;
    }
  }
  if (std::any_of(arena_off_.begin(), arena_off_.end(), [](int64_t o) { return o >= 0; })) {
    RLX_ASSIGN_OR_RETURN(arena_, scratch(prog_.arena_bytes, cat("the arena (", prog_.arena_bytes, " bytes)"), nullptr));
    stats_.arena_bytes = prog_.arena_bytes;
  }
  for (size_t i = 0; i < nb; ++i) {
    const kir::Buffer& b = prog_.buffers[i];
    if (b.alias_of >= 0) continue;
    if (arena_off_[i] >= 0) {
      range_[i] = {arena_.buffer, static_cast<uint64_t>(arena_off_[i]), words(b.bytes())};
      continue;
    }
    const std::string what = cat("buffer b", i, b.name.empty() ? "" : " '" + b.name + "'");
    if (static_cast<int64_t>(b.bytes()) > lim.max_binding_bytes)
      return error(ErrorCode::unsupported, device(), ": ", what, " is ", b.bytes(), " bytes, more than the ",
                   lim.max_binding_bytes, " one kernel binding may cover on this device");
    const Tensor* data = nullptr;
    if (b.kind == kir::BufferKind::weight) {
      RLX_ASSIGN_OR_RETURN(data, bound_weight(g, b));
      stats_.weight_bytes += b.bytes();
    } else if (b.kind == kir::BufferKind::constant) {
      data = &b.data;
    } else if (b.kind == kir::BufferKind::intermediate && !arena_.buffer.bytes) {
      stats_.arena_bytes += b.bytes();
    }
    RLX_ASSIGN_OR_RETURN(range_[i], scratch(b.bytes(), what + cat(" (", b.bytes(), " bytes)"),
                                            data && b.bytes() ? data->bytes() : nullptr));
  }
  for (size_t i = 0; i < nb; ++i)
    if (prog_.buffers[i].alias_of >= 0) range_[i] = range_[root(static_cast<int>(i))];
  return Status::ok();
}

// A kernel with more buffers than the runtime's bindings (OpenGL on llvmpipe has 16; an
// unrolled window reduction reads one constant index buffer per tap, a fused residual chain
// reads the output of every layer) reaches its arena intermediates of each dtype through one
// binding of the whole arena, and gets its constants of each dtype copied into one buffer,
// each argument at its own element offset. `bindings` receives the range of each binding;
// the result is where each argument lives. GLSL dialects only (the renderer's places).
Expected<std::vector<codegen::GlslArgPlace>> ProgramExecutable::place_arguments(const kir::GeneratedKernel& k,
                                                                                std::vector<BufferRange>& bindings,
                                                                                int max_bindings) {
  const Limits& lim = rt_->limits();
  std::vector<codegen::GlslArgPlace> places(k.args.size());
  std::vector<char> placed(k.args.size(), 0);
  std::map<DType, std::vector<size_t>> temps, consts;  // arena intermediates and constants by dtype
  for (size_t a = 0; a < k.args.size(); ++a) {
    const int r = root(k.args[a]);
    const DType dt = prog_.buffers[k.args[a]].dtype;
    const int64_t off = arena_off_[r], unit = std::max<int64_t>(4, dtype_bits(dt) / 8);
    if (off >= 0 && off % unit == 0) temps[dt].push_back(a);
    else if (prog_.buffers[r].kind == kir::BufferKind::constant && prog_.buffers[r].bytes() > 0) consts[dt].push_back(a);
  }
  bindings.clear();
  for (auto& [dt, args] : temps) {
    // the whole arena is bound: it must fit in one binding
    if (args.size() < 2 || static_cast<int64_t>(prog_.arena_bytes) > lim.max_binding_bytes) continue;
    for (size_t a : args) {
      places[a] = {static_cast<int>(bindings.size()), arena_off_[root(k.args[a])] * 8 / dtype_bits(dt)};
      placed[a] = 1;
    }
    bindings.push_back(arena_);
  }
  for (auto& [dt, args] : consts) {
    if (args.size() < 2) continue;
    // whole words per piece, so that packed 8/16-bit elements never straddle two pieces
    const size_t align = std::max<size_t>(4, dtype_bits(dt) / 8);
    size_t total = 0;
    std::vector<size_t> at;
    for (size_t a : args) {
      at.push_back(total);
      total += (prog_.buffers[root(k.args[a])].bytes() + align - 1) / align * align;
    }
    std::vector<uint8_t> bytes(total, 0);
    for (size_t j = 0; j < args.size(); ++j) {
      const kir::Buffer& b = prog_.buffers[root(k.args[args[j]])];
      std::memcpy(bytes.data() + at[j], b.data.bytes(), b.bytes());
      places[args[j]] = {static_cast<int>(bindings.size()), static_cast<int64_t>(at[j] * 8 / dtype_bits(dt))};
      placed[args[j]] = 1;
    }
    RLX_ASSIGN_OR_RETURN(BufferRange packed,
                         scratch(total, cat("the packed constants of kernel ", k.name, " (", total, " bytes)"), bytes.data()));
    bindings.push_back(packed);
  }
  for (size_t a = 0; a < k.args.size(); ++a) {
    if (placed[a]) continue;
    places[a] = {static_cast<int>(bindings.size()), 0};
    bindings.push_back(range(k.args[a]));
  }
  if (static_cast<int>(bindings.size()) > max_bindings)
    return error(ErrorCode::unsupported, device(), ": kernel ", k.name, " reads and writes ", k.args.size(), " buffers (",
                 bindings.size(), " with its intermediates and constants packed together), more than the ", max_bindings,
                 " storage buffers a kernel may bind on this device", max_bindings < lim.max_bindings ? " besides its check word" : "");
  return places;
}

// The word kernels with 64-bit integer data set, in the dialects that compute them in 32 bits
// (WGSL, HLSL), when a value does not fit (codegen::range_checked): one per program, zeroed before the first kernel.
Expected<BufferRange> ProgramExecutable::range_check_word() {
  if (range_word_.buffer.id) return range_word_;
  RLX_ASSIGN_OR_RETURN(range_word_, scratch(4, "the range-check word", nullptr));
  Command zero;
  zero.kind = Command::Kind::zero;
  zero.range = range_word_;
  list_.commands.insert(list_.commands.begin(), zero);
  check_word(range_word_, [dev = device()](int32_t) {
    return error(ErrorCode::out_of_range, dev, ": a 64-bit integer value of this program does not fit the 32 bits ", dev,
                 " computes in (its shaders compute 64-bit integers in 32 bits); run it on another device");
  });
  return range_word_;
}

Status ProgramExecutable::build_generated(std::vector<Kernel>& kernels, std::vector<std::vector<BufferRange>>& bindings) {
  const codegen::Dialect& dialect = codegen::dialect(target_.dialect);
  std::vector<std::vector<codegen::GlslArgPlace>> places(prog_.generated.size());
  bindings.resize(prog_.generated.size());
  for (size_t i = 0; i < prog_.generated.size(); ++i) {
    const kir::GeneratedKernel& k = prog_.generated[i];
    bool checked = false;
    if (dialect.emulates_int64) {
      std::vector<DType> dts;
      for (int b : k.args) dts.push_back(prog_.buffers[b].dtype);
      checked = codegen::range_checked(k, dts, target_.dialect);
    }
    const int limit = rt_->limits().max_bindings - (checked ? 1 : 0);
    if (static_cast<int>(k.args.size()) <= limit) {
      for (int b : k.args) bindings[i].push_back(range(b));
    } else if (dialect.binds_buffers) {
      RLX_ASSIGN_OR_RETURN(places[i], place_arguments(k, bindings[i], limit));
    } else {
      return error(ErrorCode::unsupported, device(), ": kernel ", k.name, " binds ", k.args.size(), " buffers, more than the ",
                   rt_->limits().max_bindings, " this device allows");
    }
    if (checked) {
      RLX_ASSIGN_OR_RETURN(BufferRange w, range_check_word());
      bindings[i].push_back(w);
    }
  }
  RLX_ASSIGN_OR_RETURN(std::vector<KernelModule> modules, codegen::render_device_modules(prog_, target_.dialect, places));
  for (const KernelModule& m : modules) {
    auto built = rt_->build(m);
    if (!built) {
      // a shader per kernel: name the kernel it was
      if (dialect.module_per_kernel && m.entries.size() == 1)
        return error(built.status().code(), "kernel ", m.entries[0].name.substr(4), ": ", built.status().message());
      return built.status();
    }
    kernels.insert(kernels.end(), built->begin(), built->end());
  }
  return Status::ok();
}

Status ProgramExecutable::build_commands() {
  std::vector<Kernel> kernels;
  std::vector<std::vector<BufferRange>> bindings;
  RLX_TRY(build_generated(kernels, bindings));
  for (const kir::Step& s : prog_.steps) {
    if (s.native) {
      const kir::NativeKernel& nk = prog_.natives[s.index];
      auto f = std::find_if(target_.natives.begin(), target_.natives.end(), [&](const NativeFamily& f) { return f.takes(nk.op); });
      if (f == target_.natives.end())
        return error(ErrorCode::internal, device(), " has no native kernel family for ", op_name(nk.op), " (node ", nk.name, ")");
      RLX_TRY(f->plan(*this, nk));
      continue;
    }
    const kir::GeneratedKernel& k = prog_.generated[s.index];
    Command c;
    Dispatch& d = c.dispatch;
    d.kernel = kernels[s.index];
    d.name = k.name;
    d.buffers = bindings[s.index];
    d.scalars = {k.rows(), k.cols()};
    // a copy onto the same memory (a donated buffer) is nothing to do
    const bool aliased = k.skip_if_aliased && k.args.size() >= 2 && range(k.args[0]) == range(k.args[1]);
    const int64_t n = k.rows() * k.cols();
    if (!aliased && n > 0) d.items = k.serial ? 1 : n;
    list_.commands.push_back(std::move(c));
  }
  return Status::ok();
}

Status ProgramExecutable::init(const Graph& g) {
  RLX_TRY(create_buffers(g));
  RLX_TRY(build_commands());
  for (const Command& c : list_.commands)
    if (c.kind == Command::Kind::dispatch && !c.dispatch.empty()) RLX_TRY(rt_->check_dispatch(c.dispatch));
  for (int b : prog_.inputs) list_.inputs.push_back({range(b), prog_.buffers[b].bytes()});
  for (int b : prog_.outputs) list_.outputs.push_back({range(b), prog_.buffers[b].bytes()});
  for (const Check& c : checks_) list_.outputs.push_back({c.word, 4});
  check_values_.assign(checks_.size(), 0);
  RLX_ASSIGN_OR_RETURN(recording_, rt_->record(list_));
  describe_program(prog_, stats_);
  return Status::ok();
}

Status ProgramExecutable::run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  std::lock_guard<std::mutex> lock(mu_);
  RLX_TRY(kir::check_run_io(prog_, inputs, outputs));
  std::vector<const void*> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) in[i] = inputs[i].bytes();
  std::vector<void*> out(outputs.size() + checks_.size());
  for (size_t i = 0; i < outputs.size(); ++i) out[i] = outputs[i].bytes();
  for (size_t i = 0; i < checks_.size(); ++i) out[outputs.size() + i] = &check_values_[i];
  RLX_TRY(rt_->replay(*recording_, in, out));
  // the kernels' own checks (a bad index was skipped, never followed)
  for (size_t i = 0; i < checks_.size(); ++i)
    if (check_values_[i]) return checks_[i].check(check_values_[i]);
  return Status::ok();
}

Expected<std::vector<Tensor>> ProgramExecutable::run(std::span<const Tensor> inputs) {
  std::vector<Tensor> outs = kir::allocate_outputs(prog_);
  RLX_TRY(run_into(inputs, outs));
  return outs;
}

}  // namespace

Expected<const Tensor*> bound_weight(const Graph& g, const kir::Buffer& b) {
  auto it = g.weights.find(b.name);
  if (it == g.weights.end() || !it->second.storage())
    return error(ErrorCode::invalid_argument, "weight '", b.name, "' has no data");
  if (it->second.dtype() != b.dtype || it->second.sizes() != b.sizes)
    return error(ErrorCode::shape_error, "weight '", b.name, "' is ", it->second.type().to_string(), ", the graph expects ",
                 dtype_name(b.dtype), sizes_to_string(b.sizes));
  return &it->second;
}

void describe_program(const kir::KernelProgram& prog, ExecStats& stats) {
  stats.generated_kernels = static_cast<int>(prog.generated.size());
  stats.native_kernels = static_cast<int>(prog.natives.size());
  stats.kernel_listing = prog.listing();
  stats.kernel_origins.clear();
  for (const kir::Step& s : prog.steps)
    stats.kernel_origins.push_back(s.native ? std::make_pair(prog.natives[s.index].name, prog.natives[s.index].origins)
                                            : std::make_pair(prog.generated[s.index].name, prog.generated[s.index].origins));
}

Claim claim_native(const NativeTable& table, const NodeDesc& n, std::string_view device) {
  if (table.empty()) return Claim::no(cat(device, " has no native kernels"));
  for (const NativeFamily& f : table)
    if (f.takes(n.op)) return f.claim(n);
  return table.front().claim(n);
}

Expected<std::unique_ptr<Executable>> RuntimeDevice::compile(const Graph& g, const CompileOptions& options) const {
  if (!runtime_) return error(ErrorCode::unavailable, info_.name, ": ", info_.reason);
  return compile_program(runtime_, target_, g, options);
}

Expected<std::unique_ptr<Executable>> make_executable(std::shared_ptr<Runtime> rt, const Target& target,
                                                      kir::KernelProgram prog, const Graph& g) {
  auto e = std::make_unique<ProgramExecutable>(std::move(rt), target, std::move(prog));
  RLX_TRY(e->init(g));
  return std::unique_ptr<Executable>(std::move(e));
}

Expected<std::unique_ptr<Executable>> compile_program(std::shared_ptr<Runtime> rt, const Target& target, const Graph& g,
                                                      const CompileOptions& options) {
  RLX_ASSIGN_OR_RETURN(kir::KernelProgram prog, schedule_program(g, options));
  return make_executable(std::move(rt), target, std::move(prog), g);
}

namespace {

class CodegenDevice final : public Device {
 public:
  CodegenDevice(std::string name, std::string reason, std::function<Claim(const NodeDesc&)> native,
                std::function<Claim(const NodeDesc&)> primitive)
      : native_(std::move(native)), primitive_(std::move(primitive)) {
    info_.name = std::move(name);
    info_.available = false;
    info_.reason = std::move(reason);
  }
  const DeviceInfo& info() const override { return info_; }
  Claim claim_native(const NodeDesc& n) const override { return native_(n); }
  Claim supports_primitive(const NodeDesc& n) const override { return primitive_(n); }
  Expected<std::unique_ptr<Executable>> compile(const Graph&, const CompileOptions&) const override {
    return error(ErrorCode::unavailable, info_.name, ": ", info_.reason);
  }

 private:
  std::function<Claim(const NodeDesc&)> native_, primitive_;
  DeviceInfo info_;
};

}  // namespace

std::shared_ptr<const Device> make_codegen_device(std::string name, std::string reason,
                                                  std::function<Claim(const NodeDesc&)> native,
                                                  std::function<Claim(const NodeDesc&)> primitive) {
  return std::make_shared<CodegenDevice>(std::move(name), std::move(reason), std::move(native), std::move(primitive));
}

Expected<kir::KernelProgram> schedule_program(const Graph& g, const CompileOptions& options) {
  RLX_ASSIGN_OR_RETURN(kir::KernelProgram prog, sched::schedule(g));
  RLX_TRY(sched::apply_donations(prog, options.donate));  // a donated output shares its input's memory
  RLX_TRY(kir::verify_program(prog));
  return prog;
}

}  // namespace rlx::hal
