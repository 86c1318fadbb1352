// rlx/compile_options.h: what Model::compile and Device::compile take (rlx/compile.h has the
// Model). Its own header so that devices, which receive the options, need not see the Model.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rlx/dispatch.h"
#include "rlx/shape.h"

namespace rlx {

namespace dist {
class Communicator;
}

struct CompileOptions {
  std::string device = "cpu";
  DispatchPolicy policy;
  // Sizes for symbolic dimensions known ahead of time (others are bound from inputs).
  DimBindings dims;
  // (output index, input index) pairs: the output may be written into the input's memory,
  // so a caller can pass the same tensor as both (parameters updated in place).
  std::vector<std::pair<int, int>> donate;
  // The group the graph's collectives (all_reduce, all_gather, ...) run over; null: this
  // process alone (rlx/comm.h). Devices that run collectives keep a reference.
  std::shared_ptr<dist::Communicator> comm;
  // A loop node (a trip count or condition known only at run time, docs/ir.md) that has run
  // this many iterations and would go on stops with an out_of_range error.
  int64_t max_loop_iterations = int64_t{1} << 24;
};

}  // namespace rlx
