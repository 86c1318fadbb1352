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
  set_family_decompose(t, OpFamily::linalg, refuse);
}

}  // namespace rlx::dispatch
