// The loop op on the host (Model::run_loop): the body, a graph in text IR, is compiled once as a
// Model of its own on the model's device (so its nodes run there, and a loop or another
// data-dependent op inside it is staged the same way), and run once per iteration while
// i < M and cond, the carried values fed back and the scan values stacked at the end.
#include <cstdint>
#include <cstring>

#include "rlx/compile.h"
#include "rlx/ir_text.h"

namespace rlx {
namespace {

// Bytes the stacked scan values of one loop may take.
constexpr int64_t kMaxScanBytes = int64_t{1} << 34;

Tensor scalar_i64(int64_t v) {
  Tensor t = Tensor::zeros(DType::i64, {});
  t.data<int64_t>()[0] = v;
  return t;
}

Tensor scalar_bool(bool v) {
  Tensor t = Tensor::zeros(DType::boolean, {});
  t.bytes()[0] = v;
  return t;
}

}  // namespace

Expected<std::vector<Tensor>> Model::run_loop(const Graph& g, const Node& n, std::span<const Tensor> args,
                                              const std::string& label, const DimBindings& dims, int64_t& iterations) {
  const std::string& text = n.attrs.s("body", "");
  Model* body = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = loop_bodies_.find(text);
    if (it == loop_bodies_.end()) {
      auto parsed = parse_graph(text, "loop body");
      if (!parsed) return parsed.status().with_context(label);
      CompileOptions o = options_;
      o.dims.clear();    // the body's symbols are bound from what each iteration feeds it
      o.donate.clear();  // the donations name the enclosing graph's inputs and outputs
      auto m = Model::compile(std::move(*parsed), std::move(o));
      if (!m) return m.status().with_context(label);
      it = loop_bodies_.emplace(text, std::move(*m)).first;
    }
    body = it->second.get();
  }
  const int64_t num_state = n.attrs.i("num_state", 0);
  if (args.size() < static_cast<size_t>(2 + num_state) || args[0].numel() != 1 || args[1].numel() != 1)
    return error(ErrorCode::invalid_argument, label, ": M and cond must hold one value each");
  const int64_t trip = n.attrs.i("bounded", 1) == 0         ? INT64_MAX  // no trip count: cond alone ends it
                       : args[0].dtype() == DType::i64 ? args[0].data<int64_t>()[0]
                                                       : static_cast<int64_t>(args[0].get_f64(0));
  bool cond = args[1].get_f64(0) != 0;
  std::vector<Tensor> feeds(args.begin(), args.end());
  const size_t n_scan = body->graph().outputs.size() - 1 - static_cast<size_t>(num_state);
  std::vector<std::vector<Tensor>> scans(n_scan);
  int64_t scan_bytes = 0;
  int64_t it = 0;
  for (; it < trip && cond; ++it) {
    // a hostile or broken model (M huge, a condition that never turns false) ends with an
    // error instead of running for ever
    if (it >= options_.max_loop_iterations)
      return error(ErrorCode::out_of_range, label, ": the loop ran ", options_.max_loop_iterations,
                   " iterations and its trip count and condition go on (CompileOptions::max_loop_iterations)");
    feeds[0] = scalar_i64(it);
    feeds[1] = scalar_bool(cond);
    auto outs = body->run(feeds);
    if (!outs) return outs.status().with_context(cat(label, ": iteration ", it));
    cond = (*outs)[0].get_f64(0) != 0;
    for (int64_t k = 0; k < num_state; ++k) feeds[static_cast<size_t>(2 + k)] = std::move((*outs)[static_cast<size_t>(1 + k)]);
    for (size_t k = 0; k < n_scan; ++k) {
      Tensor& t = (*outs)[1 + static_cast<size_t>(num_state) + k];
      if (!scans[k].empty() && t.sizes() != scans[k][0].sizes())
        return error(ErrorCode::shape_error, label, ": scan value ", k, " is ", sizes_to_string(t.sizes()), " in iteration ",
                     it, " and ", sizes_to_string(scans[k][0].sizes()), " before (they are stacked)");
      scan_bytes += static_cast<int64_t>(t.nbytes());
      if (scan_bytes > kMaxScanBytes)
        return error(ErrorCode::out_of_range, label, ": the stacked scan values pass 2^34 bytes in iteration ", it);
      scans[k].push_back(std::move(t));
    }
  }
  iterations = it;
  std::vector<Tensor> result(feeds.begin() + 2, feeds.begin() + 2 + num_state);
  for (size_t k = 0; k < n_scan; ++k) {
    const TensorType& declared = g.type(n.outputs[static_cast<size_t>(num_state) + k]);
    Sizes elem;
    if (!scans[k].empty()) {
      elem = scans[k][0].sizes();
    } else {  // no iteration: [0, ...] needs the element's dims from the type
      for (size_t d = 1; d < declared.shape.size(); ++d) {
        const Dim& dim = declared.shape[d];
        if (dim.is_symbol() && dims.count(dim.symbol_name())) {
          elem.push_back(dims.at(dim.symbol_name()));
          continue;
        }
        if (!dim.is_static())
          return error(ErrorCode::shape_error, label, ": scan value ", k, " of a loop that ran no iteration has the "
                       "symbolic element dims ", shape_to_string(declared.shape));
        elem.push_back(declared.shape[d].size());
      }
    }
    Sizes stacked{it};
    stacked.insert(stacked.end(), elem.begin(), elem.end());
    Tensor out = Tensor::zeros(declared.dtype, stacked);
    size_t off = 0;
    for (const Tensor& t : scans[k]) {
      std::memcpy(out.bytes() + off, t.bytes(), t.nbytes());
      off += t.nbytes();
    }
    result.push_back(std::move(out));
  }
  return result;
}

}  // namespace rlx
