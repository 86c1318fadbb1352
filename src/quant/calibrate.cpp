// Static activation scales from sample inputs (quant/calibrate.h).
#include "quant/calibrate.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "rlx/mapped_file.h"
#include "models/bert.h"
#include "rlx/compile.h"

namespace rlx::quant {

namespace {

constexpr int kBins = 8192;

bool is_quantized_linear(const std::string& name, const TensorType& t) {
  return t.rank() == 2 && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 &&
         name.find("embed") == std::string::npos;
}

// One Linear's input: the running max |x| (pass 1) and the histogram of |x| over [0, amax]
// (pass 2, percentile only).
struct Stat {
  std::string weight;
  int output = 0;  // index among the compiled graph's outputs
  double amax = 0;
  std::vector<int64_t> hist;
  int64_t count = 0;
};

}  // namespace

std::string input_scale_name(const std::string& weight_name) {
  const std::string suffix = ".weight";
  if (weight_name.size() > suffix.size() && weight_name.compare(weight_name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return weight_name.substr(0, weight_name.size() - suffix.size()) + ".input_scale";
  return weight_name + ".input_scale";
}

Expected<std::vector<std::string>> read_calibration_sentences(const std::string& path) {
  RLX_TRY(require_regular_file(path));
  std::ifstream in(path);
  if (!in) return error(ErrorCode::io_error, path, ": cannot read the calibration data");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) out.push_back(line);
  }
  if (out.empty()) return error(ErrorCode::invalid_argument, path, ": no sentences (the calibration data is one sentence a line)");
  return out;
}

Expected<CalibrationResult> calibrate_bert(const std::string& dir, const std::vector<std::string>& sentences,
                                           const CalibrationOptions& o) {
  const bool percentile = o.method == "percentile";
  if (!percentile && o.method != "minmax")
    return error(ErrorCode::invalid_argument, "calibration method '", o.method, "': expected minmax or percentile");
  if (percentile && !(o.percentile > 0 && o.percentile <= 100))
    return error(ErrorCode::invalid_argument, "percentile ", o.percentile, ": expected a value in (0, 100]");
  if (sentences.empty()) return error(ErrorCode::invalid_argument, "calibration needs at least one sentence");
  if (o.batch < 1 || o.max_length < 2) return error(ErrorCode::invalid_argument, "calibration batch and max_length must be positive");
  RLX_ASSIGN_OR_RETURN(models::BertModel m, models::load_bert_folder(dir));
  for (const auto& [name, t] : m.graph.weights)
    if (name.find(".weight_scale") != std::string::npos)
      return error(ErrorCode::invalid_argument, dir, ": already quantized (tensor '", name, "'); calibrate the f32 model");
  // The values reaching each Linear: the lhs of the dot whose rhs is the Linear's weight param.
  Graph& g = m.graph;
  std::map<ValueId, std::string> weight_of_param;
  for (const Node& n : g.nodes)
    if (n.op == Op::Param && is_quantized_linear(n.attrs.s("name"), g.type(n.outputs[0])))
      weight_of_param[n.outputs[0]] = n.attrs.s("name");
  std::vector<Stat> stats;
  for (const Node& n : g.nodes) {
    if (n.op != Op::Dot || n.inputs.size() != 2) continue;
    auto it = weight_of_param.find(n.inputs[1]);
    if (it == weight_of_param.end()) continue;
    Stat s;
    s.weight = it->second;
    s.output = static_cast<int>(g.outputs.size());
    g.outputs.push_back(n.inputs[0]);
    stats.push_back(std::move(s));
  }
  if (stats.empty()) return error(ErrorCode::unsupported, dir, ": found no Linear layers to calibrate");
  RLX_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::compile(g, {.device = "cpu"}));

  CalibrationResult r;
  // Each pass runs every batch and hands each Linear's values at real tokens to `visit`.
  auto pass = [&](bool count_tokens, auto&& visit) -> Status {
    for (size_t b0 = 0; b0 < sentences.size(); b0 += static_cast<size_t>(o.batch)) {
      const size_t b1 = std::min(sentences.size(), b0 + static_cast<size_t>(o.batch));
      const std::vector<std::string> batch(sentences.begin() + static_cast<std::ptrdiff_t>(b0),
                                           sentences.begin() + static_cast<std::ptrdiff_t>(b1));
      text::Encoding e = m.tokenizer.encode_batch(batch, o.max_length);
      std::vector<Tensor> in{e.ids_tensor(), e.mask_tensor(), e.type_tensor()};
      RLX_ASSIGN_OR_RETURN(std::vector<Tensor> outs, model->run(in));
      for (Stat& st : stats) {
        const Tensor& x = outs[static_cast<size_t>(st.output)];
        if (x.dtype() != DType::f32 || e.batch * e.seq == 0 || x.numel() % (e.batch * e.seq) != 0)
          return error(ErrorCode::internal, "calibration: the input of ", st.weight, " is ", x.type().to_string(),
                       ", expected f32 [", e.batch, ", ", e.seq, ", features]");
        const int64_t feat = x.numel() / (e.batch * e.seq);
        const float* p = x.data<float>();
        for (int64_t t = 0; t < e.batch * e.seq; ++t)
          if (e.attention_mask[static_cast<size_t>(t)] != 0) visit(st, p + t * feat, feat);
      }
      if (count_tokens)
        for (int64_t t = 0; t < e.batch * e.seq; ++t) r.tokens += e.attention_mask[static_cast<size_t>(t)] != 0;
    }
    return Status::ok();
  };
  // pass 1: max |x| (and the token count)
  RLX_TRY(pass(true, [](Stat& st, const float* x, int64_t n) {
    double a = st.amax;
    for (int64_t i = 0; i < n; ++i) a = std::max(a, static_cast<double>(std::fabs(x[i])));
    st.amax = a;
  }));
  for (const Stat& st : stats)
    if (!std::isfinite(st.amax))
      return error(ErrorCode::invalid_argument, dir, ": the input of ", st.weight, " is not finite on the calibration data");
  if (percentile && o.percentile < 100) {
    // pass 2: histograms of |x| over [0, amax]
    for (Stat& st : stats) st.hist.assign(kBins, 0);
    RLX_TRY(pass(false, [](Stat& st, const float* x, int64_t n) {
      if (st.amax <= 0) return;
      const double per_bin = kBins / st.amax;
      for (int64_t i = 0; i < n; ++i)
        ++st.hist[static_cast<size_t>(std::min<double>(kBins - 1, std::fabs(x[i]) * per_bin))];
      st.count += n;
    }));
  }
  for (Stat& st : stats) {
    double a = st.amax;
    if (percentile && o.percentile < 100 && st.count > 0) {
      // the smallest bin edge below which at least p % of the values lie
      const double want = o.percentile / 100.0 * static_cast<double>(st.count);
      int64_t seen = 0;
      int bin = 0;
      for (; bin < kBins; ++bin) {
        seen += st.hist[static_cast<size_t>(bin)];
        if (static_cast<double>(seen) >= want) break;
      }
      a = st.amax * std::min(kBins, bin + 1) / kBins;
    }
    // an input that is zero on every sample still needs a valid (positive) scale
    r.input_scales[st.weight] = static_cast<float>(std::max(a / 127.0, 1e-30));
  }
  r.samples = static_cast<int64_t>(sentences.size());
  r.description = percentile ? cat("percentile ", o.percentile, " over ", r.samples, " sentences (", r.tokens, " tokens)")
                             : cat("minmax over ", r.samples, " sentences (", r.tokens, " tokens)");
  return r;
}

}  // namespace rlx::quant
