#include "cpu_executable.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>

#include "codegen/c_jit.h"
#include "codegen/c_prelude.h"
#include "codegen/c_renderer.h"
#include "hal/program_executable.h"
#include "huge_page_memory.h"
#include "kernels/gemm.h"
#include "kernels/qgemm.h"
#include "kernels/attention.h"
#include "native_attention.h"
#include "native_contraction.h"
#include "dist/collective_ops.h"
#include "kernels/host_families.h"
#include "passes/schedule.h"
#include "rlx/compile_options.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {

namespace {
std::atomic<bool> g_int8_quant_reuse{true};  // set_int8_quant_reuse
}  // namespace

bool set_int8_quant_reuse(bool enable) { return g_int8_quant_reuse.exchange(enable); }

namespace {

using KernelFn = void (*)(void* const*, int64_t, int64_t, int64_t, int64_t);

struct NativeState {
  // What the native runs: the GEMM (matmul, dot, gemm) or a quantized-weight kernel.
  enum class Kind : uint8_t { gemm, qmatmul, dequantize, attention, host_family, int8, collective } kind = Kind::gemm;
  const kernels::HostFamily* host = nullptr;  // host_family: the library that runs the node
  GemmPlan plan;
  PackedB packed;  // when B is a weight
  PackedI8 i8packed;  // int8_matmul's weights, when fixed and the CPU has the panel kernel
  GemmType a_type = GemmType::f32, b_type = GemmType::f32, c_type = GemmType::f32;
  bool a_as_f16 = false, b_as_f16 = false;  // an f32 operand rounded to f16 as it is read
  GemmType bias_type = GemmType::f32;  // gemm's third operand, when it has one
  std::vector<float> bias32;           // a row bias times beta, in f32 (rebuilt per run)
  // qmatmul: y[m, n] = x[m, k] * W^T; dequantize: rows x cols values
  quant::QType qtype = quant::QType::q8_0;
  int64_t m = 0, n = 0, k = 0;
  AttentionPlan attention;
  // int8: where x's quants come from (CpuExecutable::plan_int8_quants): i8quants_[xq], made
  // by an earlier step when xq_ready, else made here; yq >= 0: this step quantizes its output
  // into i8quants_[yq] with x_scale yq_scale, for a later int8_matmul
  int xq = -1, yq = -1;
  bool xq_ready = false;
  float yq_scale = 0.f;
};

// Runs a generated kernel on one finished GEMM tile: the tile's elements are the flattened
// positions (c - base) + i * ldc + j of the kernel's domain (in elements of C's type, which
// the kernel reads C in, as it would unfused).
struct EpilogueCtx {
  KernelFn fn;
  void* const* argv;
  int64_t cols;
  const void* base;
  int64_t esize;
};

void epilogue_trampoline(void* ctx, void* c, int64_t ldc, int64_t, int64_t, int64_t mlen, int64_t nlen) {
  const auto* e = static_cast<const EpilogueCtx*>(ctx);
  const int64_t origin = (static_cast<const char*>(c) - static_cast<const char*>(e->base)) / e->esize;
  // The usual case: the kernel's rows are the GEMM's rows, so the tile is one block of its
  // domain and one call covers it (instead of one call per row).
  if (ldc == e->cols && origin % e->cols + nlen <= e->cols) {
    const int64_t r0 = origin / e->cols, c0 = origin % e->cols;
    e->fn(e->argv, r0, r0 + mlen, c0, c0 + nlen);
    return;
  }
  for (int64_t i = 0; i < mlen; ++i) {
    int64_t p0 = origin + i * ldc, p1 = p0 + nlen;
    while (p0 < p1) {
      const int64_t r = p0 / e->cols, c0 = p0 % e->cols;
      const int64_t c1 = std::min(e->cols, c0 + (p1 - p0));
      e->fn(e->argv, r, r + 1, c0, c1);
      p0 += c1 - c0;
    }
  }
}

struct ArenaFree {
  void operator()(uint8_t* p) const { huge_page_free(p); }
};

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(kir::KernelProgram p, std::shared_ptr<dist::Communicator> comm,
                std::span<const kernels::HostFamily> device_families)
      : prog_(std::move(p)), comm_(std::move(comm)), device_families_(device_families) {}
  ~CpuExecutable() override { print_profile(); }
  Status init(const Graph& g);
  Expected<std::vector<Tensor>> run(std::span<const Tensor> inputs) override;
  Status run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) override;
  const ExecStats& stats() const override { return stats_; }

 private:
  Status run_generated(int index);
  Status run_native(int index);
  Status run_collective(int index);
  Status run_steps();
  void plan_async_collectives();
  Status run_quant(const kir::NativeKernel& n, const NativeState& st);
  // Binds native n's fused epilogue (if any) to its buffers: ctx (which must outlive the
  // call) and a GemmEpilogue for a C at `c` with elements of `esize` bytes.
  GemmEpilogue bind_epilogue(const kir::NativeKernel& n, const void* c, int64_t esize, EpilogueCtx& ctx);
  Expected<NativeState> plan_quant(kir::NativeKernel& n);
  void plan_int8_quants();
  Expected<NativeState> plan_gemm(kir::NativeKernel& n);
  void print_profile() const;

  kir::KernelProgram prog_;
  std::shared_ptr<dist::Communicator> comm_;  // collectives' group; null: this process alone
  std::span<const kernels::HostFamily> device_families_;  // the device's own native kernels (static tables)
  // Asynchronous collectives (all_reduce and broadcast, which work in place on their output
  // buffer): step s starts one on the queue's thread and step wait_before_[s] waits for it
  // before it runs (the first later step that touches the output's memory; the memory plan
  // keeps that memory to the output from s to there). -1: run where the schedule reaches it.
  std::unique_ptr<dist::CollectiveQueue> queue_;
  std::vector<int> wait_before_;
  std::vector<std::vector<int64_t>> waits_at_;  // per step (and the end): tickets to wait for
  std::vector<std::function<Status()>> async_fn_;  // per step: the queued collective (made once)
  int async_collectives_ = 0;
  std::shared_ptr<codegen::JitModule> module_;
  std::vector<KernelFn> fns_;
  std::vector<void*> ptrs_;
  std::vector<std::vector<void*>> argv_;
  std::vector<NativeState> natives_;
  std::vector<std::unique_ptr<I8Quants>> i8quants_;  // activations quantized once for int8_matmuls
  std::vector<int64_t> work_;
  std::unique_ptr<uint8_t, ArenaFree> arena_;
  std::vector<Tensor> keep_;  // weights and constants referenced by pointer
  ExecStats stats_;
  std::mutex run_mu_;
  // RLX_PROFILE=1: time per step, summed over runs, printed to stderr when destroyed
  bool profile_ = std::getenv("RLX_PROFILE") != nullptr;
  std::vector<double> step_ms_;
  int profiled_runs_ = 0;
};

void CpuExecutable::print_profile() const {
  if (!profile_ || profiled_runs_ == 0) return;
  double total = 0;
  for (double t : step_ms_) total += t;
  std::fprintf(stderr, "profile: %d runs, %.3f ms per run\n", profiled_runs_, total / profiled_runs_);
  if (queue_) {
    // a step that starts a collective takes only the copy into its output; the time spent
    // communicating shows as busy, what the compute thread still had to wait for as waited
    const double busy = queue_->busy_ms() / profiled_runs_, waited = queue_->waited_ms() / profiled_runs_;
    std::fprintf(stderr,
                 "  collectives: %d asynchronous per run, %.3f ms per run in the communicator, %.3f ms per run "
                 "waited for (%.0f%% hidden)\n",
                 async_collectives_, busy, waited, busy > 0 ? 100.0 * std::max(0.0, busy - waited) / busy : 0.0);
  } else {
    double coll = 0;
    int count = 0;
    for (size_t i = 0; i < prog_.steps.size(); ++i)
      if (prog_.steps[i].native && natives_[prog_.steps[i].index].kind == NativeState::Kind::collective) {
        coll += step_ms_[i];
        ++count;
      }
    if (count > 0)
      std::fprintf(stderr, "  collectives: 0 asynchronous per run, %.3f ms per run in %d synchronous collectives\n",
                   coll / profiled_runs_, count);
  }
  // by kind: native op, or generated kernel (named by its first origin's op is not known here)
  for (size_t i = 0; i < prog_.steps.size(); ++i) {
    const kir::Step& s = prog_.steps[i];
    const std::string name = s.native ? prog_.natives[s.index].name : prog_.generated[s.index].name;
    const std::string what = s.native ? cat(op_name(prog_.natives[s.index].op), " ", prog_.natives[s.index].how,
                                            prog_.natives[s.index].epilogue >= 0 ? " +epilogue" : "")
                                      : cat("generated ", prog_.generated[s.index].rows(), "x", prog_.generated[s.index].cols());
    std::fprintf(stderr, "  %-6s %8.3f ms %5.1f%%  %s\n", name.c_str(), step_ms_[i] / profiled_runs_,
                 100.0 * step_ms_[i] / total, what.c_str());
  }
}

Status CpuExecutable::init(const Graph& g) {
  const size_t nb = prog_.buffers.size();
  ptrs_.assign(nb, nullptr);
  // weights and constants
  for (size_t i = 0; i < nb; ++i) {
    kir::Buffer& b = prog_.buffers[i];
    if (b.kind == kir::BufferKind::weight) {
      RLX_ASSIGN_OR_RETURN(const Tensor* w, hal::bound_weight(g, b));
      const Tensor& t = *w;
      keep_.push_back(t);
      ptrs_[i] = const_cast<uint8_t*>(t.bytes());
      stats_.weight_bytes += t.nbytes();
    } else if (b.kind == kir::BufferKind::constant) {
      keep_.push_back(b.data);
      ptrs_[i] = const_cast<uint8_t*>(b.data.bytes());
    }
  }
  // arena
  if (prog_.arena_bytes > 0) {
    size_t bytes = (prog_.arena_bytes + 63) / 64 * 64;
    arena_.reset(static_cast<uint8_t*>(huge_page_alloc(bytes)));  // see huge_page_memory.h
    if (!arena_) return error(ErrorCode::runtime_error, "cannot allocate a ", bytes, "-byte arena");
  }
  stats_.arena_bytes = prog_.arena_bytes;
  // generated kernels: one C file for the whole program
  std::string src = codegen::dialect(codegen::CTarget::host).prelude();
  for (const kir::GeneratedKernel& k : prog_.generated) {
    std::vector<DType> dts;
    for (int b : k.args) dts.push_back(prog_.buffers[b].dtype);
    RLX_ASSIGN_OR_RETURN(std::string fn, codegen::render_c_kernel(k, dts, "rlx_" + k.name));
    src += "\n" + fn;
  }
  if (!prog_.generated.empty()) {
    RLX_ASSIGN_OR_RETURN(module_, codegen::compile_c(src));
    for (const kir::GeneratedKernel& k : prog_.generated) {
      RLX_ASSIGN_OR_RETURN(void* p, module_->symbol("rlx_" + k.name));
      fns_.push_back(reinterpret_cast<KernelFn>(p));
      int64_t red = 1;
      for (size_t l = static_cast<size_t>(k.domain_rank); l < k.loops.size(); ++l) red *= std::max<int64_t>(1, k.loops[l].extent);
      work_.push_back(k.rows() * k.cols() * std::min<int64_t>(red, 1 << 20));
      argv_.emplace_back(k.args.size(), nullptr);
    }
  }
  // natives: each planned by the device's own family that claims it, else by the cpu's
  // (native_contraction.h)
  for (kir::NativeKernel& n : prog_.natives) {
    if (const kernels::HostFamily* own = claiming_family(device_families_, hal::node_desc(n))) {
      NativeState st;
      st.kind = NativeState::Kind::host_family;
      st.host = own;
      n.how = own->claim(hal::node_desc(n)).text;
      natives_.push_back(std::move(st));
      continue;
    }
    const CpuFamily* family = cpu_family(n.op);
    if (!family) return error(ErrorCode::internal, "cpu: no native family runs ", op_name(n.op));
    const CpuNativeKind kind = family->kind;
    if (n.epilogue >= 0 && kind != CpuNativeKind::gemm && kind != CpuNativeKind::quant && kind != CpuNativeKind::int8)
      return error(ErrorCode::internal, op_name(n.op), " has a fused epilogue; only GEMMs take one");
    NativeState st;
    switch (family->kind) {
      case CpuNativeKind::gemm: {
        RLX_ASSIGN_OR_RETURN(st, plan_gemm(n));
        break;
      }
      case CpuNativeKind::quant:
      case CpuNativeKind::int8: {
        RLX_ASSIGN_OR_RETURN(st, plan_quant(n));
        break;
      }
      case CpuNativeKind::attention: {
        st.kind = NativeState::Kind::attention;
        RLX_ASSIGN_OR_RETURN(st.attention, plan_attention_node(n.op, n.attrs, n.input_types, n.output_types));
        n.how = family->claim(NodeDesc{n.op, n.attrs, n.input_types, n.output_types, n.name}).text;
        break;
      }
      case CpuNativeKind::host_family:  // linalg, sparse, splat: a library runs the whole node
        st.kind = NativeState::Kind::host_family;
        st.host = kernels::host_family(op_info(n.op).family);
        n.how = family->claim(NodeDesc{n.op, n.attrs, n.input_types, n.output_types, n.name}).text;
        break;
      case CpuNativeKind::collective:  // over comm_ (src/dist/collective_ops.h)
        st.kind = NativeState::Kind::collective;
        n.how = cat(op_name(n.op), " over ", comm_ ? comm_->backend() : dist::default_communicator().backend());
        break;
    }
    natives_.push_back(std::move(st));
  }
  plan_int8_quants();
  plan_async_collectives();
  hal::describe_program(prog_, stats_);
  return Status::ok();
}

// Each activation an int8_matmul reads is quantized once: by the first int8_matmul that reads
// it, for the later ones that read it before anything writes it again (a layer's query, key and
// value projections), or, when it is the output of an int8_matmul (after its fused epilogue:
// the FFN's GELU), by that one as its blocks of rows are final, while they are in cache. The
// quants are the same bits either way (kernels/qgemm.h, I8Quants).
void CpuExecutable::plan_int8_quants() {
  if (!g_int8_quant_reuse.load()) return;
  auto root = [&](int b) { return prog_.root(b); };
  auto int8_at = [&](size_t s) -> NativeState* {
    if (!prog_.steps[s].native) return nullptr;
    NativeState& st = natives_[prog_.steps[s].index];
    return st.kind == NativeState::Kind::int8 ? &st : nullptr;
  };
  auto x_scale_of = [&](size_t s) {
    const kir::NativeKernel& n = prog_.natives[prog_.steps[s].index];
    return n.attrs.has("x_scale") ? static_cast<float>(n.attrs.f("x_scale")) : 0.f;
  };
  // per root buffer: the steps writing it, and the int8 steps reading it as x (in step order)
  const size_t ns = prog_.steps.size();
  std::vector<std::vector<size_t>> writers(prog_.buffers.size()), x_readers(prog_.buffers.size());
  for (size_t s = 0; s < ns; ++s) {
    for (int b : prog_.step_writes(s)) writers[b].push_back(s);
    if (int8_at(s)) x_readers[root(prog_.natives[prog_.steps[s].index].inputs[0])].push_back(s);
  }
  auto written_between = [&](int b, size_t s0, size_t s1) {  // a write in (s0, s1)
    auto it = std::upper_bound(writers[b].begin(), writers[b].end(), s0);
    return it != writers[b].end() && *it < s1;
  };
  // the quants that hold each root's current values: slot, then k and x_scale
  struct Held {
    int slot;
    int64_t k;
    float x_scale;
  };
  std::map<int, Held> held;
  for (size_t s = 0; s < ns; ++s) {
    NativeState* st = int8_at(s);
    if (st && st->m > 0 && st->n > 0) {
      const int x = root(prog_.natives[prog_.steps[s].index].inputs[0]);
      auto h = held.find(x);
      if (h != held.end() && h->second.k == st->k && h->second.x_scale == x_scale_of(s)) {
        st->xq = h->second.slot;
        st->xq_ready = true;
      } else if (auto later = std::upper_bound(x_readers[x].begin(), x_readers[x].end(), s);
                 later != x_readers[x].end() && !written_between(x, s, *later)) {
        st->xq = static_cast<int>(i8quants_.size());
        i8quants_.push_back(std::make_unique<I8Quants>());
        held[x] = {st->xq, st->k, x_scale_of(s)};
      }
    }
    for (int b : prog_.step_writes(s)) held.erase(b);
    if (!st || st->m == 0 || st->n == 0) continue;
    // this step's output, read as x by a later int8_matmul before anything writes it again
    const int y = root(prog_.natives[prog_.steps[s].index].outputs[0]);
    auto next = std::upper_bound(x_readers[y].begin(), x_readers[y].end(), s);
    if (next == x_readers[y].end() || written_between(y, s, *next)) continue;
    const NativeState* c = int8_at(*next);
    if (c->k != st->n || c->m != st->m) continue;
    st->yq = static_cast<int>(i8quants_.size());
    st->yq_scale = x_scale_of(*next);
    i8quants_.push_back(std::make_unique<I8Quants>());
    held[y] = {st->yq, st->n, st->yq_scale};
    prog_.natives[prog_.steps[s].index].how += cat(" (quantizes its output for ", prog_.natives[prog_.steps[*next].index].name, ")");
  }
  for (size_t s = 0; s < ns; ++s)
    if (NativeState* st = int8_at(s); st && st->xq_ready)
      prog_.natives[prog_.steps[s].index].how += " (x quantized before)";
}

// matmul, dot, gemm: one GEMM call (its plan, element types, and B packed once when it is fixed)
Expected<NativeState> CpuExecutable::plan_gemm(kir::NativeKernel& n) {
  NativeState st;
  RLX_ASSIGN_OR_RETURN(st.plan, plan_contraction(n.op, n.attrs, n.input_types, n.output_types));
  {
    auto ta = gemm_type_of(prog_.buffers[n.inputs[0]].dtype), tb = gemm_type_of(prog_.buffers[n.inputs[1]].dtype);
    auto tc = gemm_type_of(prog_.buffers[n.outputs[0]].dtype);
    if (!ta || !tb || !tc) return error(ErrorCode::internal, n.name, ": the native GEMM takes f32, f16 and bf16 only");
    st.a_type = *ta;
    st.b_type = *tb;
    st.c_type = *tc;
    // an f32 buffer where the node takes f16: the f16 cast (or round trip) that fed this
    // product was folded into it (ScheduleOptions::native_reads_f32_as_f16); the GEMM rounds
    // the values as it packs them
    st.a_as_f16 = *ta == GemmType::f32 && n.input_types[0].dtype == DType::f16;
    st.b_as_f16 = *tb == GemmType::f32 && n.input_types[1].dtype == DType::f16;
    if (st.plan.c_mode != GemmPlan::CMode::none) {
      auto tbias = gemm_type_of(prog_.buffers[n.inputs[2]].dtype);
      if (!tbias) return error(ErrorCode::internal, n.name, ": gemm's C must be f32, f16 or bf16");
      st.bias_type = *tbias;
      if (st.plan.c_mode == GemmPlan::CMode::bias_row) st.bias32.resize(static_cast<size_t>(st.plan.n));
    }
  }
  n.how = cat("gemm ",
              gemm_kernel_name(st.a_as_f16 ? GemmType::f16 : st.a_type, st.b_as_f16 ? GemmType::f16 : st.b_type, st.c_type),
              st.a_as_f16 || st.b_as_f16 ? " (cast from f32 while packing)" : "", " m=", st.plan.m, " n=", st.plan.n,
              " k=", st.plan.k, st.plan.batch > 1 ? cat(" batch=", st.plan.batch) : std::string());
  const kir::Buffer& bb = prog_.buffers[n.inputs[1]];
  const bool fixed_b = bb.kind == kir::BufferKind::weight || bb.kind == kir::BufferKind::constant;
  if (fixed_b && (st.plan.batch == 1 || st.plan.stride_b == 0) && !st.a_as_f16 && !st.b_as_f16) {
    // weights and folded constants (e.g. a weight cast to bf16 by autocast's narrow form) are
    // packed once; 16-bit ones stay 16-bit in their panels (half the bytes to stream)
    st.packed = pack_b_for(st.a_type, ptrs_[n.inputs[1]], st.b_type, st.plan.ldb, st.plan.trans_b, st.plan.k, st.plan.n,
                           st.plan.m);
    if (st.packed.valid()) stats_.weight_bytes += st.packed.bytes();
  }
  return st;
}

Status CpuExecutable::run_generated(int index) {
  const kir::GeneratedKernel& k = prog_.generated[index];
  std::vector<void*>& argv = argv_[index];
  for (size_t a = 0; a < k.args.size(); ++a) argv[a] = ptrs_[k.args[a]];
  KernelFn fn = fns_[index];
  if (k.skip_if_aliased && argv.size() == 2 && argv[0] == argv[1]) return Status::ok();
  const int64_t rows = k.rows(), cols = k.cols();
  ThreadPool& pool = ThreadPool::global();
  const int threads = pool.size();
  if (k.serial || threads == 1 || work_[index] < (1 << 15)) {
    fn(argv.data(), 0, rows, 0, cols);
    return Status::ok();
  }
  if (rows >= threads) {
    pool.parallel_for(rows, 1, [&](int64_t b, int64_t e) { fn(argv.data(), b, e, 0, cols); });
    return Status::ok();
  }
  // few rows: split the columns too, in chunks that keep vectors whole
  const int64_t chunks = threads * 2;
  int64_t per = (cols + chunks - 1) / chunks;
  per = (per + 15) / 16 * 16;
  const int64_t ncol = (cols + per - 1) / per;
  pool.run(rows * ncol, [&](int64_t t, int) {
    int64_t r = t / ncol, c = t % ncol;
    int64_t c0 = c * per, c1 = std::min(cols, c0 + per);
    if (c0 < c1) fn(argv.data(), r, r + 1, c0, c1);
  });
  return Status::ok();
}

Status CpuExecutable::run_native(int index) {
  const kir::NativeKernel& n = prog_.natives[index];
  NativeState& st = natives_[index];
  if (st.kind == NativeState::Kind::attention) {
    AttentionArgs a = st.attention.args;
    if (a.operand_type == DType::bf16) {
      a.q_bf16 = static_cast<const uint16_t*>(ptrs_[n.inputs[0]]);
      a.k_bf16 = static_cast<const uint16_t*>(ptrs_[n.inputs[1]]);
      a.v_bf16 = static_cast<const uint16_t*>(ptrs_[n.inputs[2]]);
    } else {
      a.q = static_cast<const float*>(ptrs_[n.inputs[0]]);
      a.k = static_cast<const float*>(ptrs_[n.inputs[1]]);
      a.v = static_cast<const float*>(ptrs_[n.inputs[2]]);
    }
    a.out = static_cast<float*>(ptrs_[n.outputs[0]]);
    if (st.attention.paged) {
      a.block_table = static_cast<const int64_t*>(ptrs_[n.inputs[3]]);
      a.mask = ptrs_[n.inputs[4]];
    } else if (st.attention.has_mask) {
      a.mask = ptrs_[n.inputs[3]];
    }
    return attention_f32(a);
  }
  if (st.kind == NativeState::Kind::host_family) {
    std::vector<const void*> in;
    std::vector<void*> out;
    for (int b : n.inputs) in.push_back(ptrs_[b]);
    for (int b : n.outputs) out.push_back(ptrs_[b]);
    return st.host->run(n.op, n.attrs, n.input_types, in, n.output_types, out);
  }
  if (st.kind == NativeState::Kind::collective) return run_collective(index);
  if (st.kind != NativeState::Kind::gemm) return run_quant(n, st);
  const GemmPlan& p = st.plan;
  GemmArgs a;
  a.m = p.m;
  a.n = p.n;
  a.k = p.k;
  a.a_type = st.a_type;
  a.b_type = st.b_type;
  a.c_type = st.c_type;
  a.a_as_f16 = st.a_as_f16;
  a.b_as_f16 = st.b_as_f16;
  a.a = ptrs_[n.inputs[0]];
  a.lda = p.lda;
  a.trans_a = p.trans_a;
  a.batch_stride_a = p.stride_a;
  a.b = ptrs_[n.inputs[1]];
  a.ldb = p.ldb;
  a.trans_b = p.trans_b;
  a.batch_stride_b = p.stride_b;
  a.c = ptrs_[n.outputs[0]];
  a.ldc = p.ldc;
  a.batch_stride_c = p.stride_c;
  a.batch = p.batch;
  a.alpha = p.alpha;
  a.beta = 0.f;
  const bool all_f32 = st.a_type == GemmType::f32 && st.b_type == GemmType::f32 && st.c_type == GemmType::f32 &&
                       st.bias_type == GemmType::f32;
  if (p.c_mode != GemmPlan::CMode::none && !all_f32) {
    // 16-bit operands: a row bias becomes beta * bias in f32 (exact before the one rounding of
    // the output); a full C is copied into the output (same type, checked by the claim) and
    // read back by the kernels with beta, widened exactly
    const void* c_in = ptrs_[n.inputs[2]];
    if (p.c_mode == GemmPlan::CMode::bias_row) {
      for (int64_t j = 0; j < p.n; ++j) {
        float v;
        if (st.bias_type == GemmType::f32) v = static_cast<const float*>(c_in)[j];
        else if (st.bias_type == GemmType::f16) v = f16_to_f32(static_cast<const uint16_t*>(c_in)[j]);
        else v = bf16_to_f32(static_cast<const uint16_t*>(c_in)[j]);
        st.bias32[static_cast<size_t>(j)] = p.beta * v;
      }
      a.bias = st.bias32.data();
    } else {
      if (c_in != a.c) std::memcpy(a.c, c_in, static_cast<size_t>(p.m * p.n) * gemm_type_size(st.c_type));
      a.beta = p.beta;
    }
  } else if (p.c_mode != GemmPlan::CMode::none) {
    const float* c_in = static_cast<const float*>(ptrs_[n.inputs[2]]);
    float* c_out = static_cast<float*>(a.c);
    if (p.c_mode == GemmPlan::CMode::bias_row && p.beta == 1.f) {
      a.bias = c_in;
    } else {
      // C (or the broadcast bias row) scaled by beta is the GEMM's starting value
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j)
          c_out[i * p.ldc + j] = p.beta * (p.c_mode == GemmPlan::CMode::full ? c_in[i * p.n + j] : c_in[j]);
      a.beta = 1.f;
    }
  }
  EpilogueCtx ctx;
  a.epilogue = bind_epilogue(n, a.c, static_cast<int64_t>(gemm_type_size(st.c_type)), ctx);
  if (st.packed.valid()) return sgemm_packed(a, st.packed);
  return sgemm(a);
}

GemmEpilogue CpuExecutable::bind_epilogue(const kir::NativeKernel& n, const void* c, int64_t esize, EpilogueCtx& ctx) {
  if (n.epilogue < 0) return {};
  const kir::GeneratedKernel& k = prog_.generated[n.epilogue];
  std::vector<void*>& argv = argv_[n.epilogue];
  for (size_t i = 0; i < k.args.size(); ++i) argv[i] = ptrs_[k.args[i]];
  ctx = EpilogueCtx{fns_[n.epilogue], argv.data(), k.cols(), c, esize};
  return GemmEpilogue{epilogue_trampoline, &ctx};
}

void CpuExecutable::plan_async_collectives() {
  const int ns = static_cast<int>(prog_.steps.size());
  wait_before_.assign(static_cast<size_t>(ns), -1);
  waits_at_.assign(static_cast<size_t>(ns) + 1, {});
  async_fn_.assign(static_cast<size_t>(ns), nullptr);
  std::vector<size_t> waits_count(static_cast<size_t>(ns) + 1, 0);
  if (!dist::overlap_collectives()) return;
  auto root = [&](int b) { return prog_.root(b); };
  auto touches = [&](const kir::Step& st, int r) {
    auto any = [&](const std::vector<int>& bs) {
      return std::any_of(bs.begin(), bs.end(), [&](int b) { return root(b) == r; });
    };
    if (!st.native) return any(prog_.generated[st.index].args);
    const kir::NativeKernel& n = prog_.natives[st.index];
    return any(n.inputs) || any(n.outputs) || (n.epilogue >= 0 && any(prog_.generated[n.epilogue].args));
  };
  for (int s = 0; s < ns; ++s) {
    const kir::Step& st = prog_.steps[s];
    if (!st.native || natives_[st.index].kind != NativeState::Kind::collective) continue;
    const kir::NativeKernel& n = prog_.natives[st.index];
    if (n.op != Op::AllReduce && n.op != Op::Broadcast) continue;  // these two work in place
    const int r = root(n.outputs[0]);
    int w = s + 1;
    while (w < ns && !touches(prog_.steps[w], r)) ++w;
    if (w == s + 1) continue;  // read at once: nothing to overlap with
    wait_before_[s] = w;
    ++waits_count[static_cast<size_t>(w)];
    // in place on the output: the step copied the input there before queuing this; the
    // pointers are read on the thread (they are rebound at the start of each run, before it)
    const int index = st.index;
    async_fn_[static_cast<size_t>(s)] = [this, index] {
      const kir::NativeKernel& nk = prog_.natives[index];
      const kir::Buffer& in = prog_.buffers[nk.inputs[0]];
      const kir::Buffer& out = prog_.buffers[nk.outputs[0]];
      void* dst = ptrs_[nk.outputs[0]];
      return dist::run_collective(comm_ ? *comm_ : dist::default_communicator(), nk.op, nk.attrs, in.dtype, in.sizes,
                                  dst, out.sizes, dst, nk.name);
    };
    ++async_collectives_;
  }
  for (size_t w = 0; w < waits_count.size(); ++w) waits_at_[w].reserve(waits_count[w]);  // no allocation per run
  if (async_collectives_ > 0) queue_ = std::make_unique<dist::CollectiveQueue>();
}

Status CpuExecutable::run_collective(int index) {
  const kir::NativeKernel& n = prog_.natives[index];
  const kir::Buffer& in = prog_.buffers[n.inputs[0]];
  const kir::Buffer& out = prog_.buffers[n.outputs[0]];
  dist::Communicator& comm = comm_ ? *comm_ : dist::default_communicator();
  const void* src = ptrs_[n.inputs[0]];
  void* dst = ptrs_[n.outputs[0]];
  auto run = [&comm, &n, &in, &out, src, dst] {
    return dist::run_collective(comm, n.op, n.attrs, in.dtype, in.sizes, src, out.sizes, dst, n.name);
  };
  // with collectives in flight this one queues behind them (the order every rank issues them in)
  if (queue_ && !queue_->idle()) {
    const std::function<Status()> fn = run;
    return queue_->wait(queue_->submit(&fn));
  }
  return run();
}

// Runs the steps in order. A step with an asynchronous collective copies its input into its
// output (the input's memory may be reused by the next step) and queues the communication, in
// place there; the step wait_before_ names waits for it first.
Status CpuExecutable::run_steps() {
  for (size_t i = 0; i < prog_.steps.size(); ++i) {
    for (int64_t t : waits_at_[i]) RLX_TRY(queue_->wait(t));
    waits_at_[i].clear();
    const kir::Step& s = prog_.steps[i];
    const auto t0 = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (s.native && wait_before_[i] >= 0) {
      const kir::NativeKernel& n = prog_.natives[s.index];
      const kir::Buffer& out = prog_.buffers[n.outputs[0]];
      void* dst = ptrs_[n.outputs[0]];
      const void* src = ptrs_[n.inputs[0]];
      if (src != dst && out.bytes()) std::memcpy(dst, src, out.bytes());
      waits_at_[static_cast<size_t>(wait_before_[i])].push_back(queue_->submit(&async_fn_[i]));
    } else if (s.native) {
      RLX_TRY(run_native(s.index));
    } else {
      RLX_TRY(run_generated(s.index));
    }
    if (profile_) step_ms_[i] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  for (int64_t t : waits_at_.back()) RLX_TRY(queue_->wait(t));
  waits_at_.back().clear();
  return Status::ok();
}

// dequantize / qmatmul: sizes from the (static) types, the codec from the format attribute.
Expected<NativeState> CpuExecutable::plan_quant(kir::NativeKernel& n) {
  NativeState st;
  if (n.op == Op::Int8MatMul) {
    // int8_matmul (kernels/qgemm.h i8gemm): x [m, k], w [n, k]
    st.kind = NativeState::Kind::int8;
    const Sizes& x = prog_.buffers[n.inputs[0]].sizes;
    st.k = x.empty() ? 1 : x.back();
    st.m = st.k > 0 ? numel(x) / st.k : 0;
    st.n = prog_.buffers[n.inputs[1]].sizes[0];
    const kir::Buffer& wb = prog_.buffers[n.inputs[1]];
    if (wb.kind == kir::BufferKind::weight || wb.kind == kir::BufferKind::constant) {
      // packed once for the VNNI panel kernel (invalid, and w read as it is, without one)
      st.i8packed = pack_i8(static_cast<const int8_t*>(ptrs_[n.inputs[1]]), st.k, st.n, st.k);
      if (st.i8packed.valid()) stats_.weight_bytes += st.i8packed.bytes();
    }
    const char* panels = !st.i8packed.valid() ? "" : qgemm_amx() ? " amx-int8 32x32 tiles" : " vpdpbusd 12x32 panels";
    n.how = cat("int8_matmul ", qgemm_kernel_name(), panels, " m=", st.m, " n=", st.n, " k=", st.k, n.attrs.has("x_scale") ? " (x per tensor)" : " (x per token)");
    return st;
  }
  const std::string fmt = n.attrs.s("format");
  auto qt = qgemm_format(fmt);
  if (!qt) return error(ErrorCode::unsupported, "cpu has no kernel for quantization format '", fmt, "'");
  st.qtype = *qt;
  if (n.epilogue >= 0) return error(ErrorCode::internal, op_name(n.op), " has a fused epilogue; only GEMMs take one");
  if (n.op == Op::Dequantize) {
    st.kind = NativeState::Kind::dequantize;
    const Sizes& out = prog_.buffers[n.outputs[0]].sizes;
    st.k = out.empty() ? 1 : out.back();
    st.m = st.k > 0 ? numel(out) / st.k : 0;
    n.how = cat("dequantize ", fmt, " ", qgemm_kernel_name(), " rows=", st.m, " cols=", st.k);
  } else {
    st.kind = NativeState::Kind::qmatmul;
    const Sizes& x = prog_.buffers[n.inputs[0]].sizes;
    st.k = x.empty() ? 1 : x.back();
    st.m = st.k > 0 ? numel(x) / st.k : 0;
    st.n = prog_.buffers[n.inputs[1]].sizes[0];
    n.how = cat("qmatmul ", fmt, " ", qgemm_kernel_name(), " m=", st.m, " n=", st.n, " k=", st.k,
                " (", qgemm_path_name(st.qtype, st.m), ")");
  }
  return st;
}

Status CpuExecutable::run_quant(const kir::NativeKernel& n, const NativeState& st) {
  if (st.kind == NativeState::Kind::int8) {
    I8GemmArgs a;
    a.m = st.m;
    a.n = st.n;
    a.k = st.k;
    a.x = static_cast<const float*>(ptrs_[n.inputs[0]]);
    a.ldx = st.k;
    a.w = static_cast<const int8_t*>(ptrs_[n.inputs[1]]);
    a.ldw = st.k;
    a.w_scale = static_cast<const float*>(ptrs_[n.inputs[2]]);
    a.w_scale_per_row = !prog_.buffers[n.inputs[2]].sizes.empty();
    if (n.inputs.size() == 4) a.bias = static_cast<const float*>(ptrs_[n.inputs[3]]);
    a.x_scale = n.attrs.has("x_scale") ? static_cast<float>(n.attrs.f("x_scale")) : 0.f;
    a.y = static_cast<float*>(ptrs_[n.outputs[0]]);
    a.ldy = st.n;
    if (st.i8packed.valid()) a.packed = &st.i8packed;
    if (st.xq >= 0) {
      a.x_quants = i8quants_[static_cast<size_t>(st.xq)].get();
      a.x_quants_ready = st.xq_ready;
    }
    if (st.yq >= 0) {
      a.y_quants = i8quants_[static_cast<size_t>(st.yq)].get();
      a.y_x_scale = st.yq_scale;
    }
    EpilogueCtx ctx;
    a.epilogue = bind_epilogue(n, a.y, sizeof(float), ctx);
    return i8gemm(a);
  }
  if (st.kind == NativeState::Kind::dequantize)
    return dequantize_rows(st.qtype, static_cast<const uint8_t*>(ptrs_[n.inputs[0]]), st.m, st.k,
                           static_cast<float*>(ptrs_[n.outputs[0]]));
  QGemmArgs a;
  a.type = st.qtype;
  a.m = st.m;
  a.n = st.n;
  a.k = st.k;
  a.x = static_cast<const float*>(ptrs_[n.inputs[0]]);
  a.ldx = st.k;
  a.w = static_cast<const uint8_t*>(ptrs_[n.inputs[1]]);
  a.ldw = prog_.buffers[n.inputs[1]].sizes[1];
  a.y = static_cast<float*>(ptrs_[n.outputs[0]]);
  a.ldy = st.n;
  return qgemm(a);
}

Status CpuExecutable::run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  std::lock_guard<std::mutex> lock(run_mu_);
  RLX_TRY(kir::check_run_io(prog_, inputs, outputs));
  for (size_t i = 0; i < inputs.size(); ++i) ptrs_[prog_.inputs[i]] = const_cast<uint8_t*>(inputs[i].bytes());
  for (size_t i = 0; i < outputs.size(); ++i) ptrs_[prog_.outputs[i]] = outputs[i].bytes();
  // an output may share memory with an input only where the program allows it
  for (size_t o = 0; o < outputs.size(); ++o) {
    const uint8_t* ob = outputs[o].bytes();
    const size_t on = outputs[o].nbytes();
    for (size_t i = 0; i < inputs.size(); ++i) {
      const uint8_t* ib = inputs[i].bytes();
      const size_t in = inputs[i].nbytes();
      if (on == 0 || in == 0 || ob >= ib + in || ib >= ob + on) continue;
      const bool donated = ob == ib && std::find(prog_.donations.begin(), prog_.donations.end(),
                                                 std::make_pair(static_cast<int>(o), static_cast<int>(i))) != prog_.donations.end();
      if (!donated)
        return error(ErrorCode::invalid_argument, "output ", o, " shares memory with input ", i,
                     " but was not compiled as donated (CompileOptions::donate)");
    }
  }
  for (size_t i = 0; i < prog_.buffers.size(); ++i) {
    const kir::Buffer& b = prog_.buffers[i];
    if (b.kind == kir::BufferKind::intermediate && b.alias_of < 0) ptrs_[i] = arena_.get() + b.arena_offset;
  }
  for (size_t i = 0; i < prog_.buffers.size(); ++i) {
    int r = static_cast<int>(i);
    while (prog_.buffers[r].alias_of >= 0) r = prog_.buffers[r].alias_of;
    if (r != static_cast<int>(i)) ptrs_[i] = ptrs_[r];
  }
  if (profile_) {
    step_ms_.resize(prog_.steps.size(), 0.0);
    ++profiled_runs_;
  }
  Status st = run_steps();
  if (queue_) {
    // never return while a collective may still write into the arena or the caller's outputs
    Status rest = queue_->wait_all();
    for (auto& w : waits_at_) w.clear();
    if (st.is_ok()) st = std::move(rest);
  }
  return st;
}

Expected<std::vector<Tensor>> CpuExecutable::run(std::span<const Tensor> inputs) {
  std::vector<Tensor> outs = kir::allocate_outputs(prog_);
  RLX_TRY(run_into(inputs, outs));
  return outs;
}

}  // namespace

const kernels::HostFamily* claiming_family(std::span<const kernels::HostFamily> device_families, const NodeDesc& n) {
  for (const kernels::HostFamily& f : device_families)
    if (f.family == op_info(n.op).family && f.claim(n).ok) return &f;
  return nullptr;
}

Expected<std::unique_ptr<Executable>> compile_host_program(const Graph& g, const CompileOptions& options,
                                                           std::span<const kernels::HostFamily> device_families) {
  // collectives (and what only feeds them) as early as their inputs allow, so that the
  // executable's asynchronous collectives overlap the kernels after them
  Graph ordered = g;
  if (dist::overlap_collectives()) sched::order_collectives_early(ordered);
  // the GEMM rounds f32 operands to f16 while packing them (gemm.h, a_as_f16), so a cast to
  // f16, or an f16 round trip, that feeds a product is not materialized for it (autocast's f16
  // training: the batch, the weights and the activations each step)
  sched::ScheduleOptions schedule_options;
  schedule_options.native_reads_f32_as_f16 = [&](const kir::NativeKernel& n, int input) {
    if (input > 1 || claiming_family(device_families, hal::node_desc(n))) return false;
    if (n.op != Op::MatMul && n.op != Op::Dot && n.op != Op::Gemm) return false;
    auto plan = plan_contraction(n.op, n.attrs, n.input_types, n.output_types);
    return plan.has_value() && plan->batch == 1;
  };
  RLX_ASSIGN_OR_RETURN(kir::KernelProgram prog, sched::schedule(ordered, schedule_options));
  // the GEMMs (and int8_matmul) run elementwise consumers of their output on each finished tile (a 16-bit
  // output is rounded first: the epilogue reads the stored values, as it would unfused); a
  // device family's kernels take none
  sched::fuse_native_epilogues(prog, [&](const kir::NativeKernel& n) {
    if (claiming_family(device_families, hal::node_desc(n))) return false;
    const DType t = n.output_types[0].dtype;
    if (n.op == Op::Int8MatMul) return t == DType::f32;
    return (n.op == Op::MatMul || n.op == Op::Dot || n.op == Op::Gemm) &&
           (t == DType::f32 || t == DType::f16 || t == DType::bf16);
  });
  RLX_TRY(sched::apply_donations(prog, options.donate));
  return make_cpu_executable(std::move(prog), g, options.comm, device_families);
}

Expected<std::unique_ptr<Executable>> make_cpu_executable(kir::KernelProgram program, const Graph& g,
                                                          std::shared_ptr<dist::Communicator> comm,
                                                          std::span<const kernels::HostFamily> device_families) {
  RLX_TRY(kir::verify_program(program));
  auto e = std::make_unique<CpuExecutable>(std::move(program), std::move(comm), device_families);
  RLX_TRY(e->init(g));
  return std::unique_ptr<Executable>(std::move(e));
}

}  // namespace rlx::cpu
