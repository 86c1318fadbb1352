// Dense factorizations and solves (the linalg family) have no decomposition into primitives:
// a device runs them natively or not at all. This rule only gives the common-IR path a clear
// refusal; there is no hidden round trip to the host.
#include "rules.h"

namespace rlx::dispatch {
namespace {

Status refuse(OpBuilder&, const RuleNode& n, std::vector<ValueId>&) {
  return error(ErrorCode::illegal, "no native factorization on this device: ", op_name(n.op),
               " has no decomposition into primitives (it runs natively on cpu through LAPACK, and on ref)");
}

}  // namespace

void register_linalg_rules(std::vector<OpRules>& t) {
  for (int i = 0; i < kNumOps; ++i)
    if (op_info(static_cast<Op>(i)).family == OpFamily::linalg) t[static_cast<size_t>(i)].decompose = refuse;
}

}  // namespace rlx::dispatch
