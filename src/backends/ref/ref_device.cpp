// The reference device: claims nothing natively, runs every primitive with the scalar
// reference interpreter (accumulating in f64). It is the ground truth of the conformance suite.
#include "ref_device.h"

#include <cstring>

#include "interpreter.h"
#include "rlx/compile_options.h"
#include "splat/splat_kernels.h"

namespace rlx::ref {
namespace {

class RefExecutable final : public Executable {
 public:
  RefExecutable(Graph g, std::shared_ptr<dist::Communicator> comm) : g_(std::move(g)), comm_(std::move(comm)) {
    stats_.generated_kernels = 0;
    stats_.kernel_listing = "reference interpreter over the primitive graph";
  }
  Expected<std::vector<Tensor>> run(std::span<const Tensor> inputs) override { return interpret(g_, inputs, comm_.get()); }
  Status run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) override {
    RLX_ASSIGN_OR_RETURN(auto outs, interpret(g_, inputs, comm_.get()));
    if (outs.size() != outputs.size())
      return error(ErrorCode::invalid_argument, "expected ", outs.size(), " outputs, got ", outputs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i].dtype() != outputs[i].dtype() || outs[i].sizes() != outputs[i].sizes())
        return error(ErrorCode::invalid_argument, "output ", i, " is ", outputs[i].type().to_string(), ", expected ",
                     outs[i].type().to_string());
      if (outs[i].nbytes()) std::memcpy(outputs[i].bytes(), outs[i].bytes(), outs[i].nbytes());
    }
    return Status::ok();
  }
  const ExecStats& stats() const override { return stats_; }

 private:
  Graph g_;
  std::shared_ptr<dist::Communicator> comm_;
  ExecStats stats_;
};

class RefDevice final : public Device {
 public:
  RefDevice() {
    info_.name = "ref";
    info_.available = true;
    info_.kind = DeviceKind::reference;
    info_.description = "scalar reference interpreter, f64 accumulation (ground truth)";
    info_.dtypes = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::c64, DType::i8, DType::u8, DType::i16,
                    DType::u16, DType::i32, DType::u32, DType::i64, DType::u64, DType::boolean};
  }
  const DeviceInfo& info() const override { return info_; }
  Claim claim_native(const NodeDesc& n) const override {
    // dense factorizations have no primitive decomposition; the interpreter runs them whole
    // with plain loops in double (interp_linalg.cpp)
    if (op_info(n.op).family == OpFamily::linalg) {
      for (const TensorType& t : n.inputs)
        if (!is_static(t.shape)) return Claim::no("the reference factorizations need static shapes");
      return Claim::yes(cat("plain-loop ", op_name(n.op), " in double"));
    }
    // splatting: the same host kernels as the cpu (src/splat/), at the node's dtype; their ground
    // truth is the NumPy renderer of tests/sci
    if (op_info(n.op).family == OpFamily::splat) return splat::claim_splat(n);
    // CSR ops: plain loops in double, a dense LU for the solves (interp_sparse.cpp), independent
    // of the cpu's thread-pooled kernels and SuiteSparse
    if (op_info(n.op).family == OpFamily::sparse) {
      for (const TensorType& t : n.inputs)
        if (!is_static(t.shape)) return Claim::no("the reference CSR ops need static shapes");
      return Claim::yes(cat("plain-loop ", op_name(n.op), " in double"));
    }
    if (op_info(n.op).family == OpFamily::collective) {
      if (!is_static(n.inputs[0].shape)) return Claim::no("collectives need static shapes");
      return Claim::yes("the compiled model's communicator (rlx/comm.h)");
    }
    return Claim::no("ref runs primitives only; it has no native kernels");
  }
  Claim supports_primitive(const NodeDesc& n) const override {
    if (!implements(n.op, n.inputs))
      return Claim::no(cat("the reference interpreter does not implement ", op_name(n.op), " on ",
                           n.inputs.empty() ? std::string("()") : n.inputs[0].to_string()));
    return Claim::yes("interpreted");
  }
  Expected<std::unique_ptr<Executable>> compile(const Graph& g, const CompileOptions& options) const override {
    return std::unique_ptr<Executable>(std::make_unique<RefExecutable>(g, options.comm));
  }

 private:
  DeviceInfo info_;
};

}  // namespace

std::shared_ptr<const Device> make_ref_device() { return std::make_shared<RefDevice>(); }

}  // namespace rlx::ref
