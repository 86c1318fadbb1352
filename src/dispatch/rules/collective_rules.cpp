// Collectives (all_reduce, all_gather, reduce_scatter, broadcast) are communication, not
// arithmetic: they have no decomposition into primitives. A device runs them natively over the
// compiled model's communicator (cpu and ref on host memory) or the graph does not compile
// there; there is no hidden copy to the host and back.
#include "rules.h"

namespace rlx::dispatch {
namespace {

Status refuse(OpBuilder&, const RuleNode& n, std::vector<ValueId>&) {
  return error(ErrorCode::illegal, op_name(n.op), " is a collective: it has no decomposition into primitives and "
               "runs natively on host devices (cpu, ref) over the model's communicator; this device has no "
               "native collective (NCCL collectives are available through rlx::dist::nccl_communicator, "
               "not yet as graph ops)");
}

}  // namespace

void register_collective_rules(std::vector<OpRules>& t) {
  set_family_decompose(t, OpFamily::collective, refuse);
}

}  // namespace rlx::dispatch
