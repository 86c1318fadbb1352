// rlx train mnist: trains the MLP or the tiny CNN on MNIST-format data (or synthetic data of
// the same shape) with one compiled training step (forward, backward, optimizer update).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "entry.h"
#include "rlx/safetensors.h"
#include "train/data.h"
#include "runtime/pipeline.h"
#include "train/pipeline_trainer.h"
#include "train/tensor_parallel_models.h"
#include "train/trainer.h"
#include "train/amp.h"

namespace rlx::cli {
namespace {

using namespace rlx::train;

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string fmt_time(double s) {
  if (!std::isfinite(s) || s < 0) s = 0;
  const long t = std::lround(s);
  char b[32];
  if (t >= 3600) {
    std::snprintf(b, sizeof b, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  } else {
    std::snprintf(b, sizeof b, "%ld:%02ld", t / 60, t % 60);
  }
  return b;
}

std::string fmt_rate(double r) {
  char b[32];
  if (r >= 1e6) {
    std::snprintf(b, sizeof b, "%.2fM", r / 1e6);
  } else if (r >= 1e3) {
    std::snprintf(b, sizeof b, "%.1fk", r / 1e3);
  } else {
    std::snprintf(b, sizeof b, "%.0f", r);
  }
  return b;
}

using Options = TrainOptions;

Expected<Options> parse(int argc, char** argv, int first) {
  RLX_ASSIGN_OR_RETURN(Args a, parse_args(argc, argv, first, {"synthetic", "quiet", "gzip", "nesterov"},
                                          {"arch", "epochs", "batch", "lr", "optimizer", "momentum", "weight-decay",
                                           "schedule", "step-epochs", "gamma", "warmup-steps", "data", "json", "save",
                                           "seed", "device", "eval-batch", "train-size", "test-size", "export-data",
                                           "beta1", "beta2", "eps", "dp", "pp", "micro-batches", "pp-schedule",
                                           "bucket-kb", "tp", "qat", "init", "precision"}));
  if (a.positional.size() != 1 || a.positional[0] != "mnist")
    return error(ErrorCode::invalid_argument, "expected `rlx train mnist ...` (the one dataset rlx trains on today)");
  Options o;
  o.arch = a.get("arch").value_or("mlp");
  if (o.arch != "mlp" && o.arch != "tinyconv" && o.arch != "dsconv")
    return error(ErrorCode::invalid_argument, "--arch must be mlp, tinyconv or dsconv, got '", o.arch, "'");
  RLX_ASSIGN_OR_RETURN(o.epochs, a.integer("epochs", 1, 0, INT32_MAX));
  RLX_ASSIGN_OR_RETURN(o.batch, a.integer("batch", 128, 1, INT32_MAX));
  RLX_ASSIGN_OR_RETURN(o.eval_batch, a.integer("eval-batch", 1000, 1, INT32_MAX));
  RLX_ASSIGN_OR_RETURN(o.train_size, a.integer("train-size", 60000, 1, INT32_MAX));
  RLX_ASSIGN_OR_RETURN(o.test_size, a.integer("test-size", 10000, 1, INT32_MAX));
  o.limit_train = a.has("train-size");
  o.limit_test = a.has("test-size");
  RLX_ASSIGN_OR_RETURN(int64_t seed, a.integer("seed", 1, 0, INT64_MAX));
  o.seed = static_cast<uint64_t>(seed);
  RLX_ASSIGN_OR_RETURN(o.opt.kind, parse_optimizer(a.get("optimizer").value_or("sgd")));
  const bool adam = o.opt.kind != OptimizerKind::sgd;
  RLX_ASSIGN_OR_RETURN(o.lr, a.number("lr", adam ? 1e-3 : 0.05, -1e30, 1e30));
  if (o.lr <= 0) return error(ErrorCode::invalid_argument, "--lr must be positive");
  RLX_ASSIGN_OR_RETURN(o.opt.momentum, a.number("momentum", 0.0, -1e30, 1e30));
  if (o.opt.momentum != 0.0 && adam) return error(ErrorCode::invalid_argument, "--momentum applies to sgd only");
  o.opt.nesterov = a.has("nesterov");
  RLX_ASSIGN_OR_RETURN(o.opt.weight_decay,
                       a.number("weight-decay", o.opt.kind == OptimizerKind::adamw ? 0.01 : 0.0, -1e30, 1e30));
  RLX_ASSIGN_OR_RETURN(o.opt.beta1, a.number("beta1", 0.9, -1e30, 1e30));
  RLX_ASSIGN_OR_RETURN(o.opt.beta2, a.number("beta2", 0.999, -1e30, 1e30));
  RLX_ASSIGN_OR_RETURN(o.opt.eps, a.number("eps", 1e-8, -1e30, 1e30));
  RLX_ASSIGN_OR_RETURN(o.sched.kind, parse_schedule(a.get("schedule").value_or("constant")));
  RLX_ASSIGN_OR_RETURN(o.step_epochs, a.number("step-epochs", 1.0, -1e30, 1e30));
  RLX_ASSIGN_OR_RETURN(o.sched.gamma, a.number("gamma", 0.1, -1e30, 1e30));
  RLX_ASSIGN_OR_RETURN(o.sched.warmup_steps, a.integer("warmup-steps", 0, 0, INT32_MAX));
  o.data = a.get("data").value_or("");
  o.synthetic = a.has("synthetic");
  if (o.synthetic == !o.data.empty())
    return error(ErrorCode::invalid_argument, "give exactly one of --data DIR (MNIST IDX files) and --synthetic");
  o.json = a.get("json").value_or("");
  o.save = a.get("save").value_or("");
  o.export_dir = a.get("export-data").value_or("");
  o.gzip = a.has("gzip");
  o.device = a.get("device").value_or(default_device_name());
  o.quiet = a.has("quiet");
  RLX_ASSIGN_OR_RETURN(int64_t dp, a.integer("dp", 1, 1, INT32_MAX));
  o.dp = static_cast<int>(dp);
  RLX_ASSIGN_OR_RETURN(o.bucket_kb, a.integer("bucket-kb", 25 * 1024, 1, INT32_MAX));
  RLX_ASSIGN_OR_RETURN(int64_t tp, a.integer("tp", 1, 1, INT32_MAX));
  o.tp = static_cast<int>(tp);
  RLX_ASSIGN_OR_RETURN(int64_t pp, a.integer("pp", 1, 1, INT32_MAX));
  o.pp = static_cast<int>(pp);
  RLX_ASSIGN_OR_RETURN(int64_t mb, a.integer("micro-batches", 4, 1, INT32_MAX));
  o.micro_batches = static_cast<int>(mb);
  o.schedule = a.get("pp-schedule").value_or("1f1b");
  RLX_TRY(parse_pipeline_schedule(o.schedule).status());
  o.qat = a.get("qat").value_or("");
  o.precision = a.get("precision").value_or("f32");
  RLX_TRY(passes::parse_precision(o.precision).status().with_context("--precision"));
  o.init = a.get("init").value_or("");
  if (!o.qat.empty() && o.qat != "int8")
    return error(ErrorCode::invalid_argument, "--qat supports int8 (the int8 targets' quantization), got '", o.qat, "'");
  if (!o.qat.empty() && o.pp > 1)
    return error(ErrorCode::invalid_argument, "--qat with --pp is not supported yet (the activation ranges are "
                 "tracked by the whole model's step)");
  if (o.tp > 1 && !o.qat.empty())
    return error(ErrorCode::invalid_argument, "--tp with --qat is not supported yet");
  return o;
}

// One line that rewrites itself on a terminal, or occasional plain lines otherwise.
class Progress {
 public:
  Progress(bool tty, bool quiet) : tty_(tty), quiet_(quiet) {}
  void update(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss, double images_per_s,
              double left_s) {
    if (quiet_) return;
    const double t = now_s();
    if (tty_) {
      if (t - last_ < 0.1 && step != steps) return;
      last_ = t;
      const int width = 24;
      const int filled = static_cast<int>(static_cast<double>(width) * static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, steps)));
      std::string bar(static_cast<size_t>(filled), '=');
      if (filled < width) bar += '>' + std::string(static_cast<size_t>(width - filled - 1), ' ');
      std::printf("\repoch %lld/%lld [%s] %lld/%lld  loss %.4f  %s img/s  left %s   ", static_cast<long long>(epoch),
                  static_cast<long long>(epochs), bar.c_str(), static_cast<long long>(step), static_cast<long long>(steps),
                  loss, fmt_rate(images_per_s).c_str(), fmt_time(left_s).c_str());
      std::fflush(stdout);
    } else {
      // about four lines an epoch
      const int64_t every = std::max<int64_t>(1, steps / 4);
      if (step % every != 0 || step == steps) return;
      std::printf("epoch %lld/%lld step %lld/%lld loss %.4f %s images/s, %s left\n", static_cast<long long>(epoch),
                  static_cast<long long>(epochs), static_cast<long long>(step), static_cast<long long>(steps), loss,
                  fmt_rate(images_per_s).c_str(), fmt_time(left_s).c_str());
      std::fflush(stdout);
    }
  }
  void end_line() {
    if (tty_ && !quiet_) std::printf("\r%80s\r", "");
  }

 private:
  bool tty_, quiet_;
  double last_ = 0.0;
};

// The first n examples of a dataset (views, no copy); all of it when it is smaller.
Dataset first_examples(const Dataset& d, int64_t n) {
  if (n >= d.size()) return d;
  Sizes s = d.images.sizes();
  s[0] = n;
  return Dataset{Tensor(d.images.dtype(), s, d.images.storage(), d.images.byte_offset()),
                 Tensor(d.labels.dtype(), {n}, d.labels.storage(), d.labels.byte_offset())};
}

int64_t count_params(const ModelDef& m) {
  int64_t n = 0;
  for (const ParamSpec& p : m.params) n += p.init.numel();
  return n;
}

}  // namespace

Expected<TrainOptions> parse_train_args(const std::vector<std::string>& args) {
  std::vector<std::string> store(args);
  std::vector<char*> av;
  for (auto& a : store) av.push_back(a.data());
  return parse(static_cast<int>(av.size()), av.data(), 0);
}

int cmd_train(int argc, char** argv) {
  auto parsed = parse(argc, argv, 2);
  if (!parsed) return report_error(parsed.status());
  auto r = train_mnist(*parsed);
  if (!r) return report_error(r.status());
  return kOk;
}

Expected<TrainResult> train_mnist(const TrainOptions& options) {
  Options o = options;
  TrainResult result;
  // data parallelism: every rank reads the same data in the same order and trains on its share
  // of each global batch; rank 0 alone prints, writes --json and --save
  // pipeline parallelism: every rank reads every batch; stage k trains the k-th layer range
  // both (--dp D --pp P): D pipelines of P stages, each on its share of every global batch
  // tensor parallelism (--tp T): the T ranks of a grid row hold the shards of one replica (or
  // of one pipeline stage); with --dp or --pp the grid's columns are the replicas or stages
  std::shared_ptr<dist::Communicator> comm, dp_group;  // comm: the --dp group, or the pipeline
  std::shared_ptr<dist::Communicator> tp_group;
  int rank = 0, ranks = 1, world_rank = 0;             // the data-parallel split
  int tp_rank = 0;
  if (o.tp > 1 && o.dp > 1 && o.pp > 1) {
    // all three: dp pipelines of pp stages, each stage's layers sharded over tp ranks
    RLX_ASSIGN_OR_RETURN(ProcessGrid3 grid, process_grid3(o.tp, o.dp, o.pp));
    tp_group = grid.tensor;
    tp_rank = grid.tp_rank;
    comm = grid.pipeline;
    dp_group = grid.data;
    rank = grid.dp_rank;
    ranks = o.dp;
    world_rank = grid.world->rank();
  } else if (o.tp > 1 && (o.dp > 1 || o.pp > 1)) {
    RLX_ASSIGN_OR_RETURN(ProcessGrid grid, process_grid(o.tp, o.dp > 1 ? o.dp : o.pp, "--tp", o.dp > 1 ? "--dp" : "--pp"));
    tp_group = grid.stage;
    tp_rank = grid.tp_rank;
    comm = grid.pipeline;  // the replicas of this shard (--dp), or the stages (--pp)
    if (o.pp == 1) {
      rank = grid.stage_index;
      ranks = o.dp;
    }
    world_rank = grid.world->rank();
  } else if (o.tp > 1) {
    RLX_ASSIGN_OR_RETURN(tp_group, process_group(o.tp, "--tp"));
    tp_rank = tp_group->rank();
    world_rank = tp_rank;
  } else if (o.dp > 1 && o.pp > 1) {
    RLX_ASSIGN_OR_RETURN(ProcessGrid grid, process_grid(o.dp, o.pp, "--dp"));
    comm = grid.pipeline;
    dp_group = grid.stage;  // the ranks that run this stage, one per pipeline
    rank = grid.tp_rank;
    ranks = o.dp;
    world_rank = grid.world->rank();
  } else {
    RLX_ASSIGN_OR_RETURN(comm, process_group(o.pp > 1 ? o.pp : o.dp, o.pp > 1 ? "--pp" : "--dp"));
    if (o.pp == 1) {
      rank = comm->rank();
      ranks = comm->size();
    }
    world_rank = comm->rank();
  }
  if (world_rank != 0) {
    o.quiet = true;
    o.json.clear();
    o.save.clear();
    o.export_dir.clear();
  }
  // data
  MnistData data;
  if (o.synthetic) {
    data = synthetic_mnist(o.train_size, o.test_size, o.seed);
  } else {
    auto d = load_mnist(o.data);
    if (!d) return d.status();
    data = std::move(*d);
    // --train-size / --test-size with --data: the first N examples of each file
    if (o.limit_train) data.train = first_examples(data.train, o.train_size);
    if (o.limit_test) data.test = first_examples(data.test, o.test_size);
  }
  if (!o.export_dir.empty()) {
    Status s = write_mnist(o.export_dir, data, o.gzip);
    if (!s.is_ok()) return s;
    if (!o.quiet)
      std::printf("wrote %lld training and %lld test images as IDX files to %s\n", static_cast<long long>(data.train.size()),
                  static_cast<long long>(data.test.size()), o.export_dir.c_str());
    if (o.epochs == 0) return result;
  }
  const Sizes& img = data.train.images.sizes();
  if (img[1] != 28 || img[2] != 28)
    return error(ErrorCode::invalid_argument, "the mnist architectures take 28x28 images, the data has ",
                              img[1], "x", img[2]);
  auto model = mnist_model(o.arch, o.seed);
  if (!model) return model.status();
  if (!o.init.empty()) {
    // --init: start from a checkpoint's parameters (fine-tuning, e.g. QAT of a trained f32 model)
    RLX_ASSIGN_OR_RETURN(safetensors::File f, safetensors::load(o.init));
    for (ParamSpec& p : model->params) {
      auto it = f.tensors.find(p.name);
      if (it == f.tensors.end())
        return error(ErrorCode::invalid_argument, o.init, ": --init needs a tensor '", p.name, "' for --arch ", o.arch);
      if (it->second.type() != p.init.type())
        return error(ErrorCode::invalid_argument, o.init, ": tensor '", p.name, "' is ", it->second.type().to_string(),
                     ", --arch ", o.arch, " expects ", p.init.type().to_string());
      p.init = it->second.clone();
    }
  }
  TrainConfig cfg;
  cfg.optimizer = o.opt;
  cfg.device = o.device;
  cfg.qat.enabled = !o.qat.empty();
  RLX_ASSIGN_OR_RETURN(cfg.amp.precision, passes::parse_precision(o.precision));
  if (ranks > 1 && o.pp == 1) cfg.comm = comm;
  cfg.bucket_bytes = o.bucket_kb * 1024;
  // with --tp the full model's trainer only evaluates and saves what the shards gather
  TrainConfig full_cfg = cfg;
  if (tp_group) full_cfg.comm = nullptr;
  auto trainer = Trainer::create(*model, full_cfg);
  if (!trainer) return trainer.status();
  Trainer& t = **trainer;  // with --pp: evaluates and saves the parameters the stages gather
  if (amp_enabled(cfg.amp) && !o.quiet)
    std::printf("precision: %s (matmul/conv operands %s, f32 accumulation, f32 master weights%s; products in the %s)\n",
                o.precision.c_str(), o.precision.c_str(), t.scaling() ? ", dynamic loss scaling" : "",
                t.config().amp.compute != passes::AutocastOptions::Compute::narrow
                    ? "widened form: f32 kernels on rounded operands"
                : t.config().amp.narrow_conv2d.value_or(true)
                    ? "narrow form: the device's 16-bit kernels"
                    : "narrow form: the device's 16-bit kernels; convolutions widened, on f32 kernels");
  std::optional<TensorParallelModel> tpm;  // this rank's shard of the model (--tp)
  std::unique_ptr<Trainer> tp_trainer;
  if (tp_group) {
    RLX_ASSIGN_OR_RETURN(TensorParallelModel m, tensor_parallel_model(*model, tp_rank, o.tp));
    tpm = std::move(m);
    cfg.tensor_parallel = tp_group;
    if (o.pp == 1) {
      RLX_ASSIGN_OR_RETURN(tp_trainer, Trainer::create(tpm->model, cfg));
    }
  }
  std::unique_ptr<PipelineTrainer> pipe;
  if (o.pp > 1) {
    RLX_ASSIGN_OR_RETURN(PipelineSchedule sched, parse_pipeline_schedule(o.schedule));
    RLX_ASSIGN_OR_RETURN(pipe, PipelineTrainer::create(tpm ? tpm->model : *model, cfg, comm, {o.micro_batches, sched, dp_group}));
  }
  Trainer* stepper = tp_trainer ? tp_trainer.get() : &t;  // the trainer that steps (without --pp)
  auto steps_done = [&] { return pipe ? pipe->steps_done() : stepper->steps_done(); };
  auto gather_parameters = [&]() -> Status {
    if (!pipe && !tp_trainer) return Status::ok();
    std::vector<std::pair<std::string, Tensor>> all;
    if (pipe) {
      RLX_ASSIGN_OR_RETURN(all, pipe->all_parameters());
    } else {
      all = tp_trainer->named_parameters();
    }
    if (tpm) {
      RLX_ASSIGN_OR_RETURN(all, gather_tensor_parallel(*tpm, all, *tp_group));
    }
    auto mine = t.named_parameters();
    for (size_t i = 0; i < mine.size(); ++i) std::memcpy(mine[i].second.bytes(), all[i].second.bytes(), all[i].second.nbytes());
    return Status::ok();
  };
  BatchLoader loader(data.train, o.batch, model->example_shape, o.seed);
  const int64_t steps_per_epoch = loader.batches_per_epoch();
  o.sched.base = o.lr;
  o.sched.total_steps = steps_per_epoch * o.epochs;
  o.sched.step_size = std::max<int64_t>(1, std::llround(o.step_epochs * static_cast<double>(steps_per_epoch)));
  const bool tty = isatty(STDOUT_FILENO) != 0;
  if (!o.quiet) {
    std::printf("rlx train mnist: %s (%lld parameters), %s lr %g, batch %lld, %lld epochs, %lld training / %lld test images (%s), device %s\n",
                o.arch.c_str(), static_cast<long long>(count_params(*model)), std::string(optimizer_name(o.opt.kind)).c_str(),
                o.lr, static_cast<long long>(o.batch), static_cast<long long>(o.epochs),
                static_cast<long long>(data.train.size()), static_cast<long long>(data.test.size()),
                o.synthetic ? "synthetic" : o.data.c_str(), o.device.c_str());
    if (cfg.qat.enabled)
      std::printf("quantization-aware training (int8): fake_quantize on the weights of %zu layers and at %zu activation "
                  "sites (ranges tracked by a moving average, momentum %g)\n",
                  t.qat_sites().size() - 1, t.qat_sites().size(), cfg.qat.momentum);
    std::fflush(stdout);
  }
  // compile every step variant before the clock starts: the full batch and the remainder
  const double c0 = now_s();
  // rank's share of a global batch of n: n / ranks examples, one more for the first n % ranks
  auto share = [&](int64_t n, int64_t* begin) {
    const dist::Share sh = dist::even_share(n, ranks, rank);
    *begin = sh.begin;
    return sh.size;
  };
  int64_t unused = 0;
  for (int64_t b : {std::min<int64_t>(o.batch, data.train.size()), data.train.size() % o.batch}) {
    if (b < ranks || pipe) continue;  // (pipeline stages compile on their first step)  // (a global batch smaller than the group is skipped, see below)
    Status s = stepper->prepare(share(b, &unused));
    if (!s.is_ok()) return s;
  }
  if (!o.quiet && !pipe) {
    auto v = stepper->step_variant(share(std::min<int64_t>(o.batch, data.train.size()), &unused));
    const ExecStats& st = (*v)->executable->stats();
    std::printf("compiled the training step in %.2f s: %d native + %d generated kernels, %zu-byte arena, parameters and optimizer state updated in place\n",
                now_s() - c0, st.native_kernels, st.generated_kernels, st.arena_bytes);
  }
  Sizes test_shape{data.test.size()};
  test_shape.insert(test_shape.end(), model->example_shape.begin(), model->example_shape.end());
  auto test_images_or = data.test.images.reshaped(test_shape);
  if (!test_images_or) return test_images_or.status();
  const Tensor test_images = *test_images_or;
  nlohmann::json records = nlohmann::json::array();
  Progress progress(tty, o.quiet);
  EvalResult last_eval;
  for (int64_t epoch = 1; epoch <= o.epochs; ++epoch) {
    loader.start_epoch(epoch);
    double loss_sum = 0.0;
    int64_t steps = 0, images = 0;
    const double start = now_s();
    Tensor x, y;
    while (loader.next(x, y)) {
      const int64_t n = x.sizes()[0];
      if (ranks > 1) {
        // every rank needs at least one example (all of them skip a last batch smaller than that)
        if (n < ranks) continue;
        int64_t begin = 0;
        const int64_t b = share(n, &begin);
        const size_t example = static_cast<size_t>(x.numel() / n) * 4;
        Sizes xs = x.sizes();
        xs[0] = b;
        x = Tensor(DType::f32, xs, x.storage(), x.byte_offset() + static_cast<size_t>(begin) * example);
        y = Tensor(DType::i32, {b}, y.storage(), y.byte_offset() + static_cast<size_t>(begin) * 4);
      }
      auto loss = pipe ? pipe->step(x, y, o.sched.at(steps_done())) : stepper->step(x, y, o.sched.at(steps_done()));
      if (!loss) {
        progress.end_line();
        return loss.status();
      }
      loss_sum += *loss;
      ++steps;
      images += n;
      const double el = now_s() - start;
      const double rate = static_cast<double>(images) / std::max(el, 1e-9);
      const double left = static_cast<double>(data.train.size() * (o.epochs - epoch + 1) - images) / std::max(rate, 1e-9);
      progress.update(epoch, o.epochs, steps, steps_per_epoch, loss_sum / static_cast<double>(steps), rate, left);
    }
    const double seconds = now_s() - start;
    progress.end_line();
    if (!std::isfinite(loss_sum))
      return error(ErrorCode::runtime_error, "the loss diverged (not finite) in epoch ", epoch, "; try a smaller --lr");
    RLX_TRY(gather_parameters());
    auto ev = t.evaluate(test_images, data.test.labels, o.eval_batch);
    if (!ev) return ev.status();
    last_eval = *ev;
    const double ips = static_cast<double>(images) / seconds;
    const double mean_loss = loss_sum / static_cast<double>(std::max<int64_t>(1, steps));
    if (!o.quiet) {
      std::printf("epoch %lld/%lld: loss %.4f, %.0f images/s (%.2f s), test accuracy %.2f%% (loss %.4f)\n",
                  static_cast<long long>(epoch), static_cast<long long>(o.epochs), mean_loss, ips, seconds,
                  100.0 * ev->accuracy(), ev->loss);
      std::fflush(stdout);
    }
    records.push_back({{"framework", "rlx"}, {"arch", o.arch}, {"epoch", epoch}, {"batch", o.batch},
                       {"optimizer", std::string(optimizer_name(o.opt.kind))}, {"lr", o.sched.at(steps_done() - 1)},
                       {"steps", steps}, {"images", images}, {"loss", mean_loss}, {"train_seconds", seconds},
                       {"images_per_s", ips}, {"test_accuracy", ev->accuracy()}, {"test_loss", ev->loss},
                       {"device", o.device}});
    if (!o.json.empty()) {
      std::ofstream f(o.json);
      f << records.dump(1) << "\n";
      if (!f) return error(ErrorCode::io_error, o.json, ": cannot write");
    }
  }
  if (!o.save.empty()) {
    std::map<std::string, std::string> meta{{"arch", o.arch},
                                            {"epochs", std::to_string(o.epochs)},
                                            {"optimizer", std::string(optimizer_name(o.opt.kind))},
                                            {"test_accuracy", std::to_string(last_eval.accuracy())},
                                            {"layout", "linear weights [in, out] (y = x W + b); conv weights [out, in, kh, kw]"}};
    auto tensors = t.named_parameters();
    if (amp_enabled(cfg.amp)) meta["precision"] = o.precision;
    if (cfg.qat.enabled) {
      // the sites' scales and zero points: `rlx codegen` quantizes with them instead of calibrating
      meta["qat"] = o.qat;
      for (auto& nt : t.qat_tensors()) tensors.push_back(std::move(nt));
    }
    Status s = safetensors::save(o.save, tensors, meta);
    if (!s.is_ok()) return s;
    if (!o.quiet) std::printf("saved %zu tensors to %s\n", tensors.size(), o.save.c_str());
  }
  result.records = std::move(records);
  result.parameters = t.named_parameters();
  result.test_accuracy = last_eval.accuracy();
  result.test_loss = last_eval.loss;
  return result;
}

}  // namespace rlx::cli
