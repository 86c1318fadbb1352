// The reference interpreter's splatting ops: the host kernels of src/splat/ run on the
// interpreter's tensors at the node's dtype (the cpu runs the same code; the independent check
// of these kernels is the NumPy renderer and the finite-difference tests of tests/sci).
#include "backends/ref/interp_internal.h"
#include "splat/splat_kernels.h"

namespace rlx::ref::detail {

Status run_splat(const KernelArgs& k) {
  std::vector<TensorType> in_types, out_types;
  std::vector<const void*> in;
  std::vector<void*> out;
  for (const Tensor* t : k.in) {
    in_types.push_back(t->type());
    in.push_back(t->bytes());
  }
  for (Tensor& t : k.out) {
    out_types.push_back(t.type());
    out.push_back(t.bytes());
  }
  return splat::run_splat(k.node.op, k.node.attrs, in_types, in, out_types, out).with_context(k.label);
}

}  // namespace rlx::ref::detail
