// Shared pieces of the rlx command-line program: argument parsing and the verb table.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rlx/comm.h"
#include "rlx/compile.h"
#include "rlx/status.h"

namespace rlx::cli {

// Exit codes: 0 success, 1 the request failed (illegal graph, run error), 2 bad usage or input.
inline constexpr int kOk = 0, kFailed = 1, kUsage = 2;

// --name value, --name=value, and positional arguments; flags listed in `switches` take no value.
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> options;
  std::optional<std::string> get(const std::string& name) const;
  std::vector<std::string> all(const std::string& name) const;
  bool has(const std::string& name) const { return options.count(name) > 0; }
  // The value of --name as a whole decimal integer in [min, max], or `def` when absent; an error
  // naming the flag when it is not one (trailing text, out of range, overflow).
  Expected<int64_t> integer(const std::string& name, int64_t def, int64_t min, int64_t max) const;
  // A non-negative integer up to 2^64-1 (seeds).
  Expected<uint64_t> seed(const std::string& name, uint64_t def) const;
  // A finite number in [min, max] (NaN and infinities refused), or `def` when absent.
  Expected<double> number(const std::string& name, double def, double min, double max) const;
};
Expected<Args> parse_args(int argc, char** argv, int first, const std::vector<std::string>& switches,
                          const std::vector<std::string>& valued);

// Prints an error and returns the exit code for it (2 for bad input, 1 otherwise).
int report_error(const Status& s);
// "1,8,32" -> {1, 8, 32}
// Creates the folder `dir` given to `flag` (and its parents) when it does not exist, as other
// tools do with an output folder; an error naming the flag when it cannot, or when `dir` is a file.
Status make_output_dir(const std::string& dir, const std::string& flag);
// `flag` ("--batch") names the flag in the error.
Expected<std::vector<int64_t>> parse_int_list(const std::string& s, const std::string& flag = "");
// "batch=8,seq=128" -> bindings
Expected<DimBindings> parse_dims(const std::string& s);
// Policy from --policy, default prefer-native.
Expected<DispatchPolicy> policy_from(const Args& a);
// The group a verb's --tp N (or --dp N, named by `flag`) runs over: the MPI world of a job
// started with mpirun -np N, or this process alone for N = 1 outside mpirun. Errors say what
// does not match (a job of another size, N > 1 without mpirun, or several ranks but no flag).
Expected<std::shared_ptr<dist::Communicator>> process_group(int ranks, const std::string& flag = "--tp");

// A job of tp * pp ranks as a grid: rank r is tensor-parallel rank r % tp of pipeline stage
// r / tp (a stage's tensor-parallel ranks are consecutive, as in Megatron-LM). `stage` groups
// the tp ranks of this rank's stage (their collectives join the shards); `pipeline` the pp
// ranks that hold the same shard index, one per stage, in stage order.
struct ProcessGrid {
  std::shared_ptr<dist::Communicator> world, stage, pipeline;
  int tp_rank = 0, stage_index = 0;
};
// Errors when the job does not have exactly tp * pp ranks, saying what it needs. `tp_flag`
// names the first dimension in messages ("--dp" when training uses the grid for data
// parallelism across pipelines: then `stage` is the data-parallel group of the stage).
// `pp_flag` names the second ("--dp" for training with --tp and --dp: then `pipeline` is the
// data-parallel group, the replicas of this rank's shard).
Expected<ProcessGrid> process_grid(int tp, int pp, const std::string& tp_flag = "--tp", const std::string& pp_flag = "--pp");

// A job of tp * dp * pp ranks (training with all three): world rank r is shard r % tp of
// replica (r / tp) % dp of stage r / (tp * dp). `tensor` groups the tp shards of one replica's
// stage, `data` the dp replicas of one shard's stage, `pipeline` the pp stages of one shard of
// one replica. Errors when the job has another size.
struct ProcessGrid3 {
  std::shared_ptr<dist::Communicator> world, tensor, data, pipeline;
  int tp_rank = 0, dp_rank = 0, stage_index = 0;
};
Expected<ProcessGrid3> process_grid3(int tp, int dp, int pp);

struct Verb {
  const char* name;
  const char* summary;
  const char* usage;
  int (*run)(int argc, char** argv);
};
const std::vector<Verb>& verbs();

int cmd_devices(int argc, char** argv);
int cmd_info(int argc, char** argv);
int cmd_explain(int argc, char** argv);
int cmd_run(int argc, char** argv);
// rlx run MODEL --tp T --pp P (cmd_run_parallel.cpp): one forward run across ranks
int run_parallel(const Args& a);
int cmd_bench(int argc, char** argv);
int cmd_convert(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_embed(int argc, char** argv);
int cmd_make_model(int argc, char** argv);
int cmd_train(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_serve(int argc, char** argv);
// rlx codegen cortex-m (cmd_codegen.cpp, docs/targets.md)
int cmd_codegen(int argc, char** argv);
// rlx splat render|fit (cmd_splat.cpp, docs/splatting.md)
int cmd_splat(int argc, char** argv);
// rlx make-model FAMILY-tiny: a random-weight decoder of that family (cmd_generate.cpp)
int cmd_make_decoder_tiny(int argc, char** argv);

// Inputs for a graph: random floats, small integer ids, all-ones masks; symbolic dims bound
// from `dims` (batch-like and sequence-like dims recognised by name or position).
Expected<std::vector<Tensor>> synthesize_inputs(const Graph& g, const DimBindings& dims, uint64_t seed);
// Gives every weight the graph references but lacks a seeded random value (uniform in
// +-1/sqrt(fan_in)), so text-IR examples run; returns how many were synthesized, or the error
// of a weight too large to allocate (naming it).
Expected<int> synthesize_missing_weights(Graph& g, uint64_t seed);
// Binds `batch` and `seq` to the graph's symbolic input dims whatever they are named: the
// first dim of each input is the batch, the second dim of integer (token) or rank-2+ inputs
// the sequence; explicit --dims entries win.
DimBindings batch_seq_bindings(const Graph& g, int64_t batch, int64_t seq, const DimBindings& explicit_dims);

}  // namespace rlx::cli
