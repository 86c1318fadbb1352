// The data-dependent ops (nonzero, unique, non_max_suppression) have no decomposition and no
// device kernel: their output size is known only once their inputs are, so Model::run computes
// them on the host between device programs (src/runtime/data_dependent.h). A graph that still
// holds one when it is legalized did not come through Model::run.
#include "rules.h"

namespace rlx::dispatch {
namespace {

Status refuse(OpBuilder&, const RuleNode& n, std::vector<ValueId>&) {
  return error(ErrorCode::illegal, op_name(n.op), " has an output shape that depends on the data: Model::run "
               "computes it on the host and binds its count before compiling what follows; it does not compile "
               "into a device program");
}

}  // namespace

void register_data_dependent_rules(std::vector<OpRules>& t) {
  set_family_decompose(t, OpFamily::data_dependent, refuse);
}

}  // namespace rlx::dispatch
