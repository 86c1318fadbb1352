#include "opengl_device.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "../../codegen/c_renderer.h"
#include "../../codegen/glsl_prelude.h"
#include "../../passes/schedule.h"
#include "backends/csr_spmv.h"
#include "backends/gemm_plan.h"
#include "opengl_runtime.h"
#include "rlx/compile.h"

namespace rlx::opengl {
namespace {

// A dot the tiled kernel computes: f32, one contracting dim, batch dims leading (the CPU's
// GEMM planner decides the layout; its plan is device-independent). The same rule as the
// Vulkan device's, which runs the same shader.

// A storage-buffer binding: a whole buffer (size 0) or a range of one (an intermediate in the
// arena).
struct Binding {
  GLuint buffer = 0;
  GLintptr offset = 0;
  GLsizeiptr size = 0;
};

// One glDispatchCompute: the program, its storage buffers by binding, its int64 uniforms
// (location, value; locations the driver dropped as unused are left out) and the group count.
struct Step {
  GLuint program = 0;
  std::vector<Binding> bindings;
  std::vector<std::pair<GLint, int64_t>> uniforms;
  GLuint groups[3] = {0, 0, 0};  // 0 anywhere: nothing to run
  Binding zero;                  // an output zeroed before the dispatch (the transposed SpMV's)
  std::vector<uint32_t> zeros;   // its bytes of zeros
};

// The CSR kernels' index-check words (csr_spmv.h): one small buffer per spmv_csr node.
struct CsrFlags {
  GLuint buffer = 0;
  std::string node;
  Op op = Op::SpmvCsr;
};

// A compiled program: one storage buffer per kernel-level buffer (views share their target's),
// weights and constants uploaded once when it is made. A run writes the inputs into their
// buffers, dispatches every step with a storage barrier after each and reads the outputs back;
// intermediates never leave the device.
class OpenGlExecutable final : public Executable {
 public:
  OpenGlExecutable(std::shared_ptr<Runtime> rt, kir::KernelProgram prog) : rt_(std::move(rt)), prog_(std::move(prog)) {}
  ~OpenGlExecutable() override {
    Runtime::Lock lock(*rt_);
    if (!lock.status()) return;  // no context: the buffers go with the process
    std::vector<GLuint> owned = packed_;
    for (const CsrFlags& f : flags_) owned.push_back(f.buffer);
    if (arena_) owned.push_back(arena_);
    for (size_t i = 0; i < mem_.size(); ++i)
      if (owns_[i] && mem_[i]) owned.push_back(mem_[i]);
    if (!owned.empty()) rt_->gl().DeleteBuffers(static_cast<GLsizei>(owned.size()), owned.data());
  }
  Status init(const Graph& g);
  Expected<std::vector<Tensor>> run(std::span<const Tensor> inputs) override;
  Status run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) override;
  const ExecStats& stats() const override { return stats_; }

 private:
  int root(int b) const {
    while (prog_.buffers[b].alias_of >= 0) b = prog_.buffers[b].alias_of;
    return b;
  }
  Status create_buffers(const Graph& g);
  Expected<std::vector<codegen::GlslArgPlace>> place_arguments(const kir::GeneratedKernel& k, std::vector<Binding>& bindings);
  // where buffer `b` (or the buffer it views) lives
  Binding bind_of(int b) const {
    const int r = root(b);
    if (off_[r] < 0) return {mem_[r], 0, 0};
    return {mem_[r], static_cast<GLintptr>(off_[r]), static_cast<GLsizeiptr>((prog_.buffers[r].bytes() + 3) / 4 * 4)};
  }
  Status build_steps();
  void groups_for(int64_t invocations, GLuint out[3]) const;
  std::vector<std::pair<GLint, int64_t>> uniforms(GLuint program, std::initializer_list<const char*> names,
                                                  const int64_t* values) const;

  std::shared_ptr<Runtime> rt_;
  kir::KernelProgram prog_;
  std::vector<GLuint> mem_;  // per kernel-level buffer (a view holds its target's name)
  std::vector<int64_t> off_;  // byte offset of an intermediate in the arena; -1: a buffer of its own
  std::vector<char> owns_;
  GLuint arena_ = 0;  // the intermediates at the memory planner's offsets
  std::vector<GLuint> packed_;  // buffers of constants packed together for one kernel
  std::vector<CsrFlags> flags_;
  std::vector<Step> steps_;
  ExecStats stats_;
  std::mutex mu_;
};

void OpenGlExecutable::groups_for(int64_t invocations, GLuint out[3]) const {
  const int64_t groups = (invocations + codegen::kGlslWorkgroupSize - 1) / codegen::kGlslWorkgroupSize;
  const int64_t max_x = std::max(rt_->caps().max_groups[0], 1);
  out[0] = static_cast<GLuint>(std::min(groups, max_x));
  out[1] = static_cast<GLuint>((groups + max_x - 1) / max_x);  // the shader numbers x + y * groups_x
  out[2] = 1;
}

std::vector<std::pair<GLint, int64_t>> OpenGlExecutable::uniforms(GLuint program, std::initializer_list<const char*> names,
                                                                  const int64_t* values) const {
  std::vector<std::pair<GLint, int64_t>> r;
  size_t i = 0;
  for (const char* n : names) {
    const GLint loc = rt_->gl().GetUniformLocation(program, n);
    if (loc >= 0) r.push_back({loc, values[i]});
    ++i;
  }
  return r;
}

Status OpenGlExecutable::init(const Graph& g) {
  Runtime::Lock lock(*rt_);
  RLX_TRY(lock.status());
  RLX_TRY(create_buffers(g));
  RLX_TRY(build_steps());
  RLX_TRY(rt_->check("preparing the program"));
  stats_.generated_kernels = static_cast<int>(prog_.generated.size());
  stats_.native_kernels = static_cast<int>(prog_.natives.size());
  stats_.kernel_listing = prog_.listing();
  for (const kir::Step& s : prog_.steps)
    stats_.kernel_origins.push_back(s.native ? std::make_pair(prog_.natives[s.index].name, prog_.natives[s.index].origins)
                                             : std::make_pair(prog_.generated[s.index].name, prog_.generated[s.index].origins));
  return Status::ok();
}

// One immutable-size storage buffer per root buffer; weights and constants are created with
// their data (the one upload), the rest uninitialized and writable from the host (inputs).
Status OpenGlExecutable::create_buffers(const Graph& g) {
  const Gl& gl = rt_->gl();
  const size_t nb = prog_.buffers.size();
  mem_.assign(nb, 0);
  off_.assign(nb, -1);
  owns_.assign(nb, 0);
  // Intermediates live in one arena at the planner's offsets (where the driver can bind a
  // range there): one buffer for all of them, and a kernel over the storage-block limit can
  // reach all of one dtype through one binding (place_arguments).
  const int64_t align = rt_->caps().storage_align;
  for (size_t i = 0; i < nb; ++i) {
    const kir::Buffer& b = prog_.buffers[i];
    if (b.alias_of >= 0 || b.kind != kir::BufferKind::intermediate || b.bytes() == 0 || b.arena_offset < 0 ||
        b.arena_offset % align != 0 || b.arena_offset + static_cast<int64_t>(b.bytes()) > static_cast<int64_t>(prog_.arena_bytes) ||
        static_cast<int64_t>(b.bytes()) > rt_->caps().max_block_bytes)
      continue;
    off_[i] = b.arena_offset;
  }
  if (std::any_of(off_.begin(), off_.end(), [](int64_t o) { return o >= 0; })) {
    gl.CreateBuffers(1, &arena_);
    gl.NamedBufferStorage(arena_, static_cast<GLsizeiptr>((prog_.arena_bytes + 3) / 4 * 4), nullptr, GL_DYNAMIC_STORAGE_BIT);
    RLX_TRY(rt_->check(cat("allocating the arena (", prog_.arena_bytes, " bytes)")));
    stats_.arena_bytes = prog_.arena_bytes;
  }
  for (size_t i = 0; i < nb; ++i) {
    const kir::Buffer& b = prog_.buffers[i];
    if (b.alias_of >= 0) continue;
    if (off_[i] >= 0) {
      mem_[i] = arena_;
      continue;
    }
    const std::string what = cat("buffer b", i, b.name.empty() ? "" : " '" + b.name + "'");
    if (static_cast<int64_t>(b.bytes()) > rt_->caps().max_block_bytes)
      return error(ErrorCode::unsupported, "opengl: ", what, " is ", b.bytes(), " bytes, more than the ",
                   rt_->caps().max_block_bytes, " a shader storage block may hold on this driver");
    const void* data = nullptr;
    if (b.kind == kir::BufferKind::weight) {
      auto it = g.weights.find(b.name);
      if (it == g.weights.end() || !it->second.storage())
        return error(ErrorCode::invalid_argument, "weight '", b.name, "' has no data");
      if (it->second.dtype() != b.dtype || it->second.sizes() != b.sizes)
        return error(ErrorCode::shape_error, "weight '", b.name, "' is ", it->second.type().to_string(),
                     ", the graph expects ", dtype_name(b.dtype), sizes_to_string(b.sizes));
      data = it->second.bytes();
      stats_.weight_bytes += b.bytes();
    } else if (b.kind == kir::BufferKind::constant) {
      data = b.data.bytes();
    }
    GLuint name = 0;
    gl.CreateBuffers(1, &name);
    mem_[i] = name;
    owns_[i] = 1;
    // whole 32-bit words (8/16-bit dtypes are read and written as packed uint words), at least
    // one: GL refuses empty buffer storage; a buffer of a zero-size tensor is bound, never read
    const size_t bytes = std::max<size_t>((b.bytes() + 3) / 4 * 4, 4);
    gl.NamedBufferStorage(name, static_cast<GLsizeiptr>(bytes), nullptr, GL_DYNAMIC_STORAGE_BIT);
    if (data && b.bytes()) gl.NamedBufferSubData(name, 0, static_cast<GLsizeiptr>(b.bytes()), data);
    RLX_TRY(rt_->check("allocating " + what + cat(" (", b.bytes(), " bytes)")));
  }
  for (size_t i = 0; i < nb; ++i)
    if (prog_.buffers[i].alias_of >= 0) mem_[i] = mem_[root(static_cast<int>(i))];
  return Status::ok();
}

// A kernel with more buffers than the driver's storage blocks (llvmpipe has 16; an unrolled
// window reduction reads one constant index buffer per tap, a fused residual chain reads the
// output of every layer) reaches its arena intermediates of each dtype through one binding of
// the whole arena, and gets its constants of each dtype copied into one buffer, each argument
// at its own element offset. `bindings` receives the buffer of each binding; the result is
// where each argument lives.
Expected<std::vector<codegen::GlslArgPlace>> OpenGlExecutable::place_arguments(const kir::GeneratedKernel& k,
                                                                               std::vector<Binding>& bindings) {
  const int max_blocks = rt_->caps().max_storage_blocks;
  std::vector<codegen::GlslArgPlace> places(k.args.size());
  std::map<DType, std::vector<size_t>> groups;  // constant arguments by dtype
  for (size_t a = 0; a < k.args.size(); ++a) {
    const kir::Buffer& b = prog_.buffers[root(k.args[a])];
    if (b.kind == kir::BufferKind::constant && b.bytes() > 0) groups[prog_.buffers[k.args[a]].dtype].push_back(a);
  }
  bindings.clear();
  std::vector<char> placed(k.args.size(), 0);
  std::map<DType, std::vector<size_t>> temps;  // arena intermediates by dtype
  for (size_t a = 0; a < k.args.size(); ++a) {
    const DType dt = prog_.buffers[k.args[a]].dtype;
    const int64_t off = off_[root(k.args[a])], unit = std::max<int64_t>(4, dtype_bits(dt) / 8);
    if (off >= 0 && off % unit == 0) temps[dt].push_back(a);
  }
  for (auto& [dt, args] : temps) {
    // the whole arena is bound: it must fit in one storage block
    if (args.size() < 2 || static_cast<int64_t>(prog_.arena_bytes) > rt_->caps().max_block_bytes) continue;
    for (size_t a : args) {
      places[a] = {static_cast<int>(bindings.size()), off_[root(k.args[a])] * 8 / dtype_bits(dt)};
      placed[a] = 1;
    }
    bindings.push_back({arena_, 0, 0});
  }
  for (auto& [dt, args] : groups) {
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
    const Gl& gl = rt_->gl();
    GLuint name = 0;
    gl.CreateBuffers(1, &name);
    gl.NamedBufferStorage(name, static_cast<GLsizeiptr>(total), bytes.data(), 0);
    packed_.push_back(name);
    RLX_TRY(rt_->check(cat("packing the constants of kernel ", k.name, " (", total, " bytes)")));
    bindings.push_back({name, 0, 0});
  }
  for (size_t a = 0; a < k.args.size(); ++a) {
    if (placed[a]) continue;
    places[a] = {static_cast<int>(bindings.size()), 0};
    bindings.push_back(bind_of(k.args[a]));
  }
  if (static_cast<int>(bindings.size()) > max_blocks)
    return error(ErrorCode::unsupported, "opengl: kernel ", k.name, " reads and writes ", k.args.size(), " buffers (",
                 bindings.size(), " with its intermediates and constants packed together), more than the ", max_blocks,
                 " storage blocks a compute shader may bind on this driver");
  return places;
}

Status OpenGlExecutable::build_steps() {
  // programs: one shader per generated kernel, the shared GEMM shader for native dots
  const std::string prelude = codegen::glsl_prelude(codegen::CTarget::glsl_gl);
  if (std::getenv("RLX_DUMP_GLSL")) std::fprintf(stderr, "%s\n", prog_.to_text().c_str());
  const int max_blocks = rt_->caps().max_storage_blocks;
  std::vector<GLuint> gen(prog_.generated.size(), 0);
  std::vector<std::vector<Binding>> gen_bindings(prog_.generated.size());
  for (size_t i = 0; i < prog_.generated.size(); ++i) {
    const kir::GeneratedKernel& k = prog_.generated[i];
    std::vector<codegen::GlslArgPlace> places;
    if (static_cast<int>(k.args.size()) > max_blocks) {
      RLX_ASSIGN_OR_RETURN(places, place_arguments(k, gen_bindings[i]));
    } else {
      for (int b : k.args) gen_bindings[i].push_back(bind_of(b));
    }
    std::vector<DType> dts;
    for (int b : k.args) dts.push_back(prog_.buffers[b].dtype);
    RLX_ASSIGN_OR_RETURN(std::string body, codegen::render_c_kernel(k, dts, "rlx_" + k.name, codegen::CTarget::glsl_gl, places));
    if (std::getenv("RLX_DUMP_GLSL")) std::fprintf(stderr, "%s\n", body.c_str());  // the kernel, without the prelude
    auto p = rt_->program(prelude + body);
    if (!p) return error(p.status().code(), "kernel ", k.name, ": ", p.status().message());
    gen[i] = *p;
  }
  GLuint gemm = 0;
  if (!prog_.natives.empty()) {
    RLX_ASSIGN_OR_RETURN(gemm, rt_->program(codegen::glsl_gemm_source(codegen::CTarget::glsl_gl)));
  }
  const auto& mg = rt_->caps().max_groups;
  for (const kir::Step& s : prog_.steps) {
    Step st;
    if (s.native) {
      const kir::NativeKernel& nk = prog_.natives[s.index];
      NodeDesc d{nk.op, nk.attrs, nk.input_types, nk.output_types, nk.name};
      if (backends::csr_kernel_op(nk.op)) {
        RLX_ASSIGN_OR_RETURN(backends::CsrSpmvPlan p, backends::plan_csr_spmv(d));
        RLX_ASSIGN_OR_RETURN(st.program, rt_->program(backends::csr_spmv_glsl_source(p, true)));
        const Gl& gl = rt_->gl();
        CsrFlags f{0, nk.name, nk.op};
        gl.CreateBuffers(1, &f.buffer);
        gl.NamedBufferStorage(f.buffer, 4, nullptr, GL_DYNAMIC_STORAGE_BIT);
        RLX_TRY(rt_->check("allocating the CSR index-check flag"));
        flags_.push_back(f);
        st.bindings = {bind_of(nk.inputs[0]), bind_of(nk.inputs[1]), bind_of(nk.inputs[2]),
                       bind_of(nk.inputs[3]), bind_of(nk.outputs[0]), Binding{f.buffer, 0, 0}};
        const int64_t v[4] = {p.n, p.m, p.k, p.nnz};
        st.uniforms = uniforms(st.program, {"rlx_p0", "rlx_p1", "rlx_p2", "rlx_p3"}, v);
        if (p.work_items > 0) groups_for(p.work_items, st.groups);
        if (p.zero_output) {
          st.zero = bind_of(nk.outputs[0]);
          st.zeros.assign(static_cast<size_t>((prog_.buffers[nk.outputs[0]].bytes() + 3) / 4), 0u);
        }
        steps_.push_back(std::move(st));
        continue;
      }
      RLX_ASSIGN_OR_RETURN(backends::GemmPlan p, backends::plan_tiled_gemm(d));
      st.program = gemm;
      st.bindings = {bind_of(nk.inputs[0]), bind_of(nk.inputs[1]), bind_of(nk.outputs[0])};
      const int64_t v[10] = {p.m, p.n, p.k, p.stride_a, p.trans_a ? 1 : p.lda, p.trans_a ? p.lda : 1,
                             p.stride_b, p.trans_b ? 1 : p.ldb, p.trans_b ? p.ldb : 1, p.stride_c};
      st.uniforms = uniforms(gemm, {"rlx_p0", "rlx_p1", "rlx_p2", "rlx_p3", "rlx_p4", "rlx_p5", "rlx_p6", "rlx_p7", "rlx_p8", "rlx_p9"}, v);
      if (p.m * p.n * p.batch > 0) {
        st.groups[0] = static_cast<GLuint>((p.n + 15) / 16);
        st.groups[1] = static_cast<GLuint>((p.m + 15) / 16);
        st.groups[2] = static_cast<GLuint>(p.batch);
        if (st.groups[0] > static_cast<GLuint>(mg[0]) || st.groups[1] > static_cast<GLuint>(mg[1]) ||
            st.groups[2] > static_cast<GLuint>(mg[2]))
          return error(ErrorCode::unsupported, "opengl: the product ", nk.name, " needs ", st.groups[0], "x", st.groups[1], "x",
                       st.groups[2], " work groups, more than this driver dispatches");
      }
    } else {
      const kir::GeneratedKernel& k = prog_.generated[s.index];
      st.program = gen[s.index];
      st.bindings = gen_bindings[s.index];
      const int64_t v[2] = {k.rows(), k.cols()};
      st.uniforms = uniforms(st.program, {"rlx_rows", "rlx_cols"}, v);
      // a copy onto the same memory (a donated buffer) is nothing to do
      const bool aliased = k.skip_if_aliased && k.args.size() >= 2 && root(k.args[0]) == root(k.args[1]);
      const int64_t n = k.rows() * k.cols();
      if (!aliased && n > 0) {
        if (k.serial) st.groups[0] = st.groups[1] = st.groups[2] = 1;
        else groups_for(n, st.groups);
        if (st.groups[1] > static_cast<GLuint>(mg[1]))
          return error(ErrorCode::unsupported, "opengl: kernel ", k.name, " covers ", n,
                       " elements, more than this driver dispatches");
      }
    }
    steps_.push_back(std::move(st));
  }
  return Status::ok();
}

Status OpenGlExecutable::run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  std::lock_guard<std::mutex> guard(mu_);
  RLX_TRY(kir::check_run_io(prog_, inputs, outputs));
  Runtime::Lock lock(*rt_);
  RLX_TRY(lock.status());
  const Gl& gl = rt_->gl();
  // Inputs are written before any kernel runs and outputs read after the last, so an output
  // may share host memory with an input (a donated cache) safely.
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].nbytes()) {
      const Binding b = bind_of(prog_.inputs[i]);
      gl.NamedBufferSubData(b.buffer, b.offset, static_cast<GLsizeiptr>(inputs[i].nbytes()), inputs[i].bytes());
    }
  const int32_t zero = 0;
  for (const CsrFlags& f : flags_) gl.NamedBufferSubData(f.buffer, 0, 4, &zero);
  for (const Step& s : steps_) {
    // zeroed even when A has no rows (no groups): y = A^T x is then all zeros
    if (s.zero.buffer) {
      gl.NamedBufferSubData(s.zero.buffer, s.zero.offset, static_cast<GLsizeiptr>(s.zeros.size() * 4), s.zeros.data());
      gl.MemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
    }
    if (s.groups[0] == 0 || s.groups[1] == 0 || s.groups[2] == 0) continue;
    gl.UseProgram(s.program);
    for (size_t i = 0; i < s.bindings.size(); ++i) {
      const Binding& b = s.bindings[i];
      if (b.size > 0) gl.BindBufferRange(GL_SHADER_STORAGE_BUFFER, static_cast<GLuint>(i), b.buffer, b.offset, b.size);
      else gl.BindBufferBase(GL_SHADER_STORAGE_BUFFER, static_cast<GLuint>(i), b.buffer);
    }
    for (auto [loc, v] : s.uniforms) gl.Uniform1i64ARB(loc, v);
    gl.DispatchCompute(s.groups[0], s.groups[1], s.groups[2]);
    gl.MemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  }
  // the reads below (and the next run's input writes) see every shader write
  gl.MemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].nbytes()) {
      const Binding b = bind_of(prog_.outputs[i]);
      gl.GetNamedBufferSubData(b.buffer, b.offset, static_cast<GLsizeiptr>(outputs[i].nbytes()), outputs[i].bytes());
    }
  gl.UseProgram(0);
  RLX_TRY(rt_->check("running the program"));
  // the CSR kernels' index checks (a bad index was skipped, never followed)
  for (const CsrFlags& f : flags_) {
    int32_t flags = 0;
    gl.GetNamedBufferSubData(f.buffer, 0, 4, &flags);
    if (flags) return backends::csr_spmv_flag_error(flags, f.node, f.op);
  }
  return Status::ok();
}

Expected<std::vector<Tensor>> OpenGlExecutable::run(std::span<const Tensor> inputs) {
  std::vector<Tensor> outs = kir::allocate_outputs(prog_);
  RLX_TRY(run_into(inputs, outs));
  return outs;
}

class OpenGlDevice final : public Device {
 public:
  OpenGlDevice() {
    info_.name = "opengl";
    auto rt = Runtime::create();
    if (!rt) {
      info_.available = false;
      info_.reason = rt.status().message();
      return;
    }
    rt_ = *rt;
    const Caps& c = rt_->caps();
    info_.available = true;
    info_.description = rt_->description();
    // 8/16-bit dtypes are stored packed in uint words (GLSL 4.50 has no such types; see
    // c_renderer.h), so every dtype but f64 is there on any OpenGL 4.5 driver
    info_.dtypes = {DType::f32, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i16, DType::u16, DType::boolean,
                    DType::i32, DType::u32, DType::i64, DType::u64};
    if (c.fp64) info_.dtypes.push_back(DType::f64);
    caps_.fp64 = c.fp64;
    caps_.int8 = true;
    caps_.int16 = true;
  }
  const DeviceInfo& info() const override { return info_; }

  Claim claim_native(const NodeDesc& n) const override {
    if (op_info(n.op).family == OpFamily::sparse) return backends::claim_csr_spmv(n, "opengl", caps_.fp64);
    return backends::claim_tiled_gemm(n, "opengl");
  }

  Claim supports_primitive(const NodeDesc& n) const override { return codegen::glsl_supports(n, caps_); }

  Expected<std::unique_ptr<Executable>> compile(const Graph& g, const CompileOptions& options) const override {
    RLX_ASSIGN_OR_RETURN(kir::KernelProgram prog, sched::schedule(g));
    RLX_TRY(sched::apply_donations(prog, options.donate));  // a donated output shares its input's buffer
    RLX_TRY(kir::verify_program(prog));
    auto e = std::make_unique<OpenGlExecutable>(rt_, std::move(prog));
    RLX_TRY(e->init(g));
    return std::unique_ptr<Executable>(std::move(e));
  }

 private:
  DeviceInfo info_;
  codegen::GlslCaps caps_;
  std::shared_ptr<Runtime> rt_;
};

}  // namespace

std::shared_ptr<const Device> make_opengl_device() { return std::make_shared<OpenGlDevice>(); }

}  // namespace rlx::opengl
