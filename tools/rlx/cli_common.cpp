#include <cerrno>
#include <cstdlib>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <cmath>
#include <random>

#include "cli.h"

namespace rlx::cli {

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = options.find(name);
  if (it == options.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

Status make_output_dir(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir, ec))
    return error(ErrorCode::io_error, flag, " ", dir, ": cannot create the folder",
                 ec ? ": " + ec.message() : std::string(" (a file of that name is there)"));
  return Status::ok();
}

namespace {
// How the user spelled the flag: -n for one letter, --name otherwise.
std::string flag_name(const std::string& name) { return (name.size() == 1 ? "-" : "--") + name; }
}  // namespace

Expected<int64_t> Args::integer(const std::string& name, int64_t def, int64_t min, int64_t max) const {
  auto v = get(name);
  if (!v) return def;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno == ERANGE || x < min || x > max)
    return error(ErrorCode::invalid_argument, flag_name(name), " expects an integer from ", min, " to ", max, ", got '",
                 v->substr(0, 40), "'");
  return static_cast<int64_t>(x);
}

Expected<uint64_t> Args::seed(const std::string& name, uint64_t def) const {
  auto v = get(name);
  if (!v) return def;
  errno = 0;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v->c_str(), &end, 10);
  if (v->empty() || (*v)[0] == '-' || *end != '\0' || errno == ERANGE)
    return error(ErrorCode::invalid_argument, flag_name(name), " expects an integer from 0 to 2^64-1, got '", v->substr(0, 40), "'");
  return static_cast<uint64_t>(x);
}

Expected<double> Args::number(const std::string& name, double def, double min, double max) const {
  auto v = get(name);
  if (!v) return def;
  char* end = nullptr;
  const double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || !std::isfinite(x) || x < min || x > max)
    return error(ErrorCode::invalid_argument, flag_name(name), " expects a number from ", min, " to ", max, ", got '",
                 v->substr(0, 40), "'");
  return x;
}

std::vector<std::string> Args::all(const std::string& name) const {
  auto it = options.find(name);
  return it == options.end() ? std::vector<std::string>{} : it->second;
}

Expected<Args> parse_args(int argc, char** argv, int first, const std::vector<std::string>& switches,
                          const std::vector<std::string>& valued) {
  Args a;
  auto known = [](const std::vector<std::string>& v, const std::string& n) {
    return std::find(v.begin(), v.end(), n) != v.end();
  };
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) != 0 || s == "--") {
      a.positional.push_back(s);
      continue;
    }
    std::string name = s.substr(2), value;
    size_t eq = name.find('=');
    bool has_value = eq != std::string::npos;
    if (has_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (known(switches, name)) {
      if (has_value) return error(ErrorCode::invalid_argument, "--", name, " takes no value");
      a.options[name].push_back("1");
    } else if (known(valued, name)) {
      if (!has_value) {
        if (i + 1 >= argc) return error(ErrorCode::invalid_argument, "--", name, " needs a value");
        value = argv[++i];
      }
      // an empty file name, device or number is a mistake (an unset shell variable); a prompt
      // may be empty
      if (value.empty() && name != "prompt") return error(ErrorCode::invalid_argument, "--", name, " needs a value, got an empty one");
      a.options[name].push_back(value);
    } else {
      return error(ErrorCode::invalid_argument, "unknown option --", name.substr(0, 60));
    }
  }
  return a;
}

namespace {
// `msg` with every line over 400 characters cut in its middle: an error quotes input (a token,
// a line of text IR, a key) and must not echo a megabyte of it.
std::string clip_lines(const std::string& msg) {
  constexpr size_t kMax = 400, kHead = 250, kTail = 100;
  std::string out;
  size_t p = 0;
  while (p <= msg.size()) {
    size_t e = msg.find('\n', p);
    if (e == std::string::npos) e = msg.size();
    const std::string line = msg.substr(p, e - p);
    out += line.size() <= kMax ? line
                               : cat(line.substr(0, kHead), " [... ", line.size() - kHead - kTail, " characters ...] ",
                                     line.substr(line.size() - kTail));
    if (e == msg.size()) break;
    out += '\n';
    p = e + 1;
  }
  return out;
}
}  // namespace

int report_error(const Status& s) {
  std::fprintf(stderr, "error: %s\n", clip_lines(s.message()).c_str());
  switch (s.code()) {
    case ErrorCode::illegal:
    case ErrorCode::runtime_error:
    case ErrorCode::internal:
    case ErrorCode::unavailable: return kFailed;
    default: return kUsage;
  }
}

Expected<std::vector<int64_t>> parse_int_list(const std::string& s, const std::string& flag) {
  std::vector<int64_t> r;
  size_t p = 0;
  while (p <= s.size()) {
    size_t c = s.find(',', p);
    std::string item = s.substr(p, c == std::string::npos ? std::string::npos : c - p);
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v <= 0 || v >= (int64_t{1} << 40))
      return error(ErrorCode::invalid_argument, flag.empty() ? "" : flag + ": ", "expected a list of positive integers, got '",
                   s.substr(0, 60), "'");
    r.push_back(v);
    if (c == std::string::npos) break;
    p = c + 1;
  }
  return r;
}

Expected<DimBindings> parse_dims(const std::string& s) {
  DimBindings b;
  size_t p = 0;
  while (p < s.size()) {
    size_t c = s.find(',', p);
    std::string item = s.substr(p, c == std::string::npos ? std::string::npos : c - p);
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return error(ErrorCode::invalid_argument, "--dims expects name=size pairs, got '", item, "'");
    char* end = nullptr;
    long long v = std::strtoll(item.c_str() + eq + 1, &end, 10);
    if (*end != '\0' || v < 0) return error(ErrorCode::invalid_argument, "bad size in '", item, "'");
    b[item.substr(0, eq)] = v;
    if (c == std::string::npos) break;
    p = c + 1;
  }
  return b;
}

Expected<DispatchPolicy> policy_from(const Args& a) {
  auto p = a.get("policy");
  if (!p) return DispatchPolicy{};
  return DispatchPolicy::parse(*p);
}

DimBindings batch_seq_bindings(const Graph& g, int64_t batch, int64_t seq, const DimBindings& explicit_dims) {
  DimBindings b = explicit_dims;
  for (ValueId in : g.inputs) {
    const TensorType& t = g.values[in].type;
    for (int d = 0; d < t.rank(); ++d) {
      const Dim& dim = t.shape[d];
      if (!dim.is_symbol() || b.count(dim.symbol_name())) continue;
      const std::string& n = dim.symbol_name();
      bool seq_like = n.find("seq") != std::string::npos || n.find("len") != std::string::npos ||
                      n.find("token") != std::string::npos || (d == 1 && !is_float(t.dtype));
      b[n] = seq_like ? seq : (d == 0 || n.find("batch") != std::string::npos ? batch : seq);
    }
  }
  return b;
}

Expected<int> synthesize_missing_weights(Graph& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int made = 0;
  for (const Node& n : g.nodes) {
    if (n.op != Op::Param) continue;
    const std::string name = n.attrs.s("name");
    if (g.weights.count(name)) continue;
    const TensorType& t = g.type(n.outputs[0]);
    auto sizes = static_sizes(t.shape);
    if (!sizes) continue;
    RLX_ASSIGN_OR_RETURN(Tensor w, Tensor::allocate(t.dtype, *sizes, "weight '" + name + "' (synthesized: the model has no data for it)"));
    double fan_in = sizes->empty() ? 1.0 : static_cast<double>(sizes->front());
    std::uniform_real_distribution<double> u(-1.0 / std::sqrt(fan_in), 1.0 / std::sqrt(fan_in));
    for (int64_t i = 0; i < w.numel(); ++i) w.set_f64(i, u(rng));
    g.weights[name] = std::move(w);
    ++made;
  }
  return made;
}

Expected<std::vector<Tensor>> synthesize_inputs(const Graph& g, const DimBindings& dims, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> xs;
  for (ValueId in : g.inputs) {
    const Value& v = g.values[in];
    Shape s = bind_shape(v.type.shape, dims);
    auto sizes = static_sizes(s, "input '" + v.name + "'");
    if (!sizes) return sizes.status();
    RLX_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(v.type.dtype, *sizes, "input '" + v.name + "'"));
    const bool mask = v.name.find("mask") != std::string::npos;
    const bool type_ids = v.name.find("type") != std::string::npos;
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::uniform_int_distribution<int> ids(0, 99);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (mask || t.dtype() == DType::boolean) {
        t.set_f64(i, 1.0);
      } else if (type_ids) {
        t.set_f64(i, 0.0);
      } else if (is_float(t.dtype())) {
        t.set_f64(i, u(rng));
      } else {
        t.set_f64(i, ids(rng));
      }
    }
    xs.push_back(std::move(t));
  }
  return xs;
}

Expected<std::shared_ptr<dist::Communicator>> process_group(int ranks, const std::string& flag) {
  if (ranks < 1) return error(ErrorCode::invalid_argument, flag, " must be at least 1, got ", ranks);
  if (ranks == 1 && !dist::launched_by_mpi()) return dist::single_process_communicator();
  RLX_ASSIGN_OR_RETURN(std::shared_ptr<dist::Communicator> world, dist::world_communicator());
  if (world->size() != ranks)
    return error(ErrorCode::invalid_argument, flag, " ", ranks, " needs a job of exactly ", ranks, " ranks (mpirun -np ",
                 ranks, "); this one has ", world->size(), ranks == 1 ? cat(" (give ", flag, " with the number of ranks)") : "");
  return world;
}

// The world of an mpirun job that a grid of `ranks` ranks (`flags`) needs: exactly that many.
static Expected<std::shared_ptr<dist::Communicator>> grid_world(int ranks, const std::string& flags) {
  if (!dist::launched_by_mpi())
    return error(ErrorCode::invalid_argument, flags, " needs a job of exactly ", ranks, " ranks (mpirun -np ", ranks,
                 "); this process was not started by mpirun");
  RLX_ASSIGN_OR_RETURN(std::shared_ptr<dist::Communicator> world, dist::world_communicator());
  if (world->size() != ranks)
    return error(ErrorCode::invalid_argument, flags, " needs a job of exactly ", ranks, " ranks (mpirun -np ", ranks,
                 "); this one has ", world->size());
  return world;
}

Expected<ProcessGrid> process_grid(int tp, int pp, const std::string& tp_flag, const std::string& pp_flag) {
  if (tp < 1 || pp < 1)
    return error(ErrorCode::invalid_argument, tp_flag, " and ", pp_flag, " must be at least 1, got ", tp, " and ", pp);
  const int ranks = tp * pp;
  const std::string flags = cat(tp_flag, " ", tp, " ", pp_flag, " ", pp);
  ProcessGrid g;
  RLX_ASSIGN_OR_RETURN(g.world, grid_world(ranks, flags));
  const int r = g.world->rank();
  g.tp_rank = r % tp;
  g.stage_index = r / tp;
  // every rank makes both splits in the same order (each is collective over the world)
  RLX_ASSIGN_OR_RETURN(g.stage, g.world->split(g.stage_index, g.tp_rank));
  RLX_ASSIGN_OR_RETURN(g.pipeline, g.world->split(g.tp_rank, g.stage_index));
  if (!g.stage || !g.pipeline || g.stage->size() != tp || g.pipeline->size() != pp)
    return error(ErrorCode::internal, "splitting ", ranks, " ranks into a ", pp, " x ", tp, " grid gave groups of ",
                 g.stage ? g.stage->size() : 0, " and ", g.pipeline ? g.pipeline->size() : 0);
  return g;
}

Expected<ProcessGrid3> process_grid3(int tp, int dp, int pp) {
  if (tp < 1 || dp < 1 || pp < 1)
    return error(ErrorCode::invalid_argument, "--tp, --dp and --pp must be at least 1, got ", tp, ", ", dp, " and ", pp);
  const int ranks = tp * dp * pp;
  const std::string flags = cat("--tp ", tp, " --dp ", dp, " --pp ", pp);
  ProcessGrid3 g;
  RLX_ASSIGN_OR_RETURN(g.world, grid_world(ranks, flags));
  const int r = g.world->rank();
  g.tp_rank = r % tp;
  g.dp_rank = r / tp % dp;
  g.stage_index = r / (tp * dp);
  // three splits, in the same order on every rank (each is collective over the world)
  RLX_ASSIGN_OR_RETURN(g.tensor, g.world->split(g.dp_rank + dp * g.stage_index, g.tp_rank));
  RLX_ASSIGN_OR_RETURN(g.data, g.world->split(g.tp_rank + tp * g.stage_index, g.dp_rank));
  RLX_ASSIGN_OR_RETURN(g.pipeline, g.world->split(g.tp_rank + tp * g.dp_rank, g.stage_index));
  if (!g.tensor || !g.data || !g.pipeline || g.tensor->size() != tp || g.data->size() != dp || g.pipeline->size() != pp)
    return error(ErrorCode::internal, "splitting ", ranks, " ranks into a ", tp, " x ", dp, " x ", pp, " grid failed");
  return g;
}

}  // namespace rlx::cli
