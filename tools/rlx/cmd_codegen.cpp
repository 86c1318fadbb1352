// rlx codegen cortex-m|hexagon|fpga MODEL --out DIR: ahead-of-time code generation of
// full-integer int8 inference for Cortex-M microcontrollers (C), Hexagon DSPs (C with HVX) and
// FPGAs (SystemVerilog) (docs/targets.md). The hexagon target's --run builds with clang's Hexagon
// target and runs the program in qemu-hexagon, checking its logits bit for bit as for Cortex-M.
//
// MODEL is a checkpoint written by `rlx train mnist --save FILE.safetensors` (its "arch"
// metadata, or the tensor names, say which architecture). The verb builds the model's graph,
// lowers it for the target (an op the target cannot run is an error naming the node),
// takes the activation scales from the checkpoint when it was trained with `--qat int8` (the
// "qat.<site>.scale/zero_point" tensors; --ptq calibrates anyway), or else calibrates activation
// ranges by running the float model on --calib training images, quantizes, checks the int8 model against the float model on --eval test images, and writes
// the C project with --inputs test images embedded. With --run it also builds the project with
// arm-none-eabi-gcc, runs it in qemu-system-arm for M3, M4 and M0 (when it fits the M0 board's 16K
// of RAM), and checks that the logits the
// firmware prints are bit-identical to the host int8 reference. The fpga target shares all of that
// up to the int8 program, then writes the SystemVerilog design; its --run
// simulates it with Verilator (bit-identical logits, cycles) and synthesizes it with Yosys.
#include <cstdio>
#include <fstream>

#include "cli.h"
#include "rlx/safetensors.h"
#include "targets/cortex_m/cortex_m.h"
#include "targets/fpga/fpga.h"
#include "targets/hexagon/hexagon.h"
#include "train/data.h"
#include "train/models.h"
#include "targets/int8/rlx_mcu_kernels.h"

namespace rlx::cli {
namespace {

using namespace rlx::targets::cortex_m;

Tensor first_flat(const train::Dataset& d, int64_t n, int64_t features) {
  n = std::min(n, d.size());
  Tensor t = Tensor::zeros(DType::f32, {n, features});
  std::copy(d.images.data<float>(), d.images.data<float>() + n * features, t.data<float>());
  return t;
}

// What both targets share: the checkpoint's graph lowered into int8 layers, quantized, checked
// against the float model, and the embedded test inputs with their host-reference logits.
struct Prepared {
  Int8Program q;
  EmbeddedInputs ins;
  std::vector<std::vector<int8_t>> want;  // host int8 reference logits per embedded input
  std::string summary;
};

enum class Target { cortex_m, hexagon, fpga };

Expected<Prepared> prepare(const Args& a, Target target) {
  const std::string model_path = a.positional[1];
  RLX_ASSIGN_OR_RETURN(int64_t n_calib, a.integer("calib", 500, 1, INT32_MAX));
  RLX_ASSIGN_OR_RETURN(int64_t n_eval, a.integer("eval", 1000, 0, INT32_MAX));
  RLX_ASSIGN_OR_RETURN(int64_t n_inputs, a.integer("inputs", 8, 1, INT32_MAX));
  RLX_ASSIGN_OR_RETURN(int64_t seed, a.integer("seed", 1, 0, INT64_MAX));
  if (n_inputs > 256) return error(ErrorCode::invalid_argument, "--inputs is at most 256 (they are stored in flash)");
  RLX_ASSIGN_OR_RETURN(safetensors::File f, safetensors::load(model_path));
  std::string arch = a.get("arch").value_or("");
  if (arch.empty()) {
    auto it = f.metadata.find("arch");
    arch = it != f.metadata.end()             ? it->second
           : f.tensors.count("conv1.weight") ? "tinyconv"
           : f.tensors.count("stem.weight")  ? "dsconv"
                                             : "mlp";
  }
  RLX_ASSIGN_OR_RETURN(train::ModelDef model, train::mnist_model(arch, 1));
  RLX_ASSIGN_OR_RETURN(Graph g, classifier_graph(model, f.tensors));
  auto lowered = target == Target::fpga      ? targets::fpga::lower_for_fpga(g)
                 : target == Target::hexagon ? targets::hexagon::lower_for_hexagon(g)
                                             : lower_for_cortex_m(g);
  if (!lowered) return lowered.status().with_context(cat(model_path, " (", arch, ")"));
  FloatProgram fp = std::move(*lowered);
  // data: real MNIST files or the trainer's synthetic set
  train::MnistData data;
  std::string data_name;
  if (auto dir = a.get("data")) {
    RLX_ASSIGN_OR_RETURN(data, train::load_mnist(*dir));
    data_name = *dir;
  } else {
    data = train::synthetic_mnist(n_calib, std::max<int64_t>(n_eval, n_inputs), static_cast<uint64_t>(seed));
    data_name = cat("synthetic (seed ", seed, ")");
  }
  const int64_t features = fp.n_in;
  if (data.train.images.numel() != data.train.size() * features)
    return error(ErrorCode::invalid_argument, "the data's images have ", data.train.images.numel() / std::max<int64_t>(1, data.train.size()),
                 " values, the model reads ", features);
  RLX_ASSIGN_OR_RETURN(auto qat, train::qat_params_from_checkpoint(f.tensors));
  Int8Program q;
  std::string summary;
  if (!qat.empty() && !a.has("ptq")) {
    auto qq = quantize_program_qat(fp, qat);
    if (!qq) return qq.status().with_context(model_path);
    q = std::move(*qq);
    summary = cat("data: ", data_name, "; activation scales from quantization-aware training (", qat.size(),
                  " sites in the checkpoint), no calibration\n");
  } else {
    const Tensor calib = first_flat(data.train, n_calib, features);
    RLX_ASSIGN_OR_RETURN(q, quantize_program(g, fp, calib));
    summary = cat("data: ", data_name, "; calibration on ", calib.sizes()[0], " training images",
                  qat.empty() ? "" : " (--ptq: the checkpoint's QAT scales are not used)", "\n");
  }
  // the int8 model against the float model
  n_eval = std::min(n_eval, data.test.size());
  if (n_eval > 0) {
    const Tensor test = first_flat(data.test, n_eval, features);
    RLX_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run_float(g, fp, test));
    const Tensor& logits = outs.back();
    const int32_t classes = q.n_out;
    int64_t agree = 0, float_ok = 0, int8_ok = 0;
    for (int64_t i = 0; i < n_eval; ++i) {
      const float* fl = logits.data<float>() + i * classes;
      const int32_t fpred = static_cast<int32_t>(std::max_element(fl, fl + classes) - fl);
      auto ql = run_reference(q, quantize_input(q, std::span<const float>(test.data<float>() + i * features, static_cast<size_t>(features))));
      const int32_t qpred = rlx_mcu_argmax_s8(ql.data(), classes);
      const int32_t label = data.test.labels.data<int32_t>()[i];
      agree += fpred == qpred;
      float_ok += fpred == label;
      int8_ok += qpred == label;
    }
    const double n = static_cast<double>(n_eval);
    summary += cat("int8 vs float on ", n_eval, " test images: same prediction on ", agree, " (",
                   std::to_string(100.0 * static_cast<double>(agree) / n).substr(0, 5), "%); accuracy float ",
                   std::to_string(100.0 * static_cast<double>(float_ok) / n).substr(0, 5), "%, int8 ",
                   std::to_string(100.0 * static_cast<double>(int8_ok) / n).substr(0, 5), "%\n");
  }
  Prepared r;
  for (int64_t i = 0; i < std::min(n_inputs, data.test.size()); ++i) {
    const float* x = data.test.images.data<float>() + i * features;
    r.ins.inputs.push_back(quantize_input(q, std::span<const float>(x, static_cast<size_t>(features))));
    r.ins.labels.push_back(data.test.labels.data<int32_t>()[i]);
    r.want.push_back(run_reference(q, r.ins.inputs.back()));
  }
  r.q = std::move(q);
  r.summary = std::move(summary);
  return r;
}

Status codegen_cortex_m(const Args& a) {
  const std::string out = *a.get("out");
  RLX_ASSIGN_OR_RETURN(Prepared pr, prepare(a, Target::cortex_m));
  const Int8Program& q = pr.q;
  const EmbeddedInputs& ins = pr.ins;
  const std::vector<std::vector<int8_t>>& want = pr.want;
  RLX_TRY(emit_project(q, ins, out, pr.summary));
  std::printf("%s\n%s", q.report.summary().c_str(), pr.summary.c_str());
  std::printf("wrote %s: model.c (%zu layers, %lld-byte arena), main.c with %zu embedded inputs, startup.c, link.ld, "
              "Makefile, report.txt\n",
              out.c_str(), q.layers.size(), static_cast<long long>(q.arena_bytes()), ins.inputs.size());
  if (!a.has("run")) return Status::ok();
  std::string run_summary = "\nbuilt with arm-none-eabi-gcc -O2, run in qemu-system-arm with semihosting:\n";
  for (const char* cpu : {"m3", "m4", "m0"}) {
    // the M0 board (microbit) has 16K of RAM: the arena, main's output line and the 4K stack
    const int64_t m0_ram = q.arena_bytes() + 4096 + 64 + 5 * int64_t{q.n_out};
    if (std::string(cpu) == "m0" && m0_ram > 16 * 1024) {
      run_summary += cat("  m0 (microbit): not run: the ", q.arena_bytes(), "-byte arena and the 4K stack do not fit its "
                         "16K of RAM\n");
      continue;
    }
    RLX_ASSIGN_OR_RETURN(QemuRun r, build_and_run(out, cpu));
    if (r.logits.size() != want.size())
      return error(ErrorCode::runtime_error, cpu, ": the firmware reported ", r.logits.size(), " inputs, expected ", want.size());
    int64_t same = 0;
    for (size_t i = 0; i < want.size(); ++i) same += r.logits[i] == want[i];
    run_summary += cat("  ", cpu, " (", r.machine, "): flash ", r.flash_bytes(), " bytes (text ", r.text, " + data ", r.data,
                       "), RAM ", r.ram_bytes(), " bytes (data + bss) + 4096 stack; logits bit-identical to the host "
                       "reference on ", same, " of ", want.size(), " inputs; ",
                       r.instructions.empty() ? 0 : r.instructions[0], " instructions per inference (QEMU -icount, +-",
                       std::string(cpu) == "m0" ? 63 : 40, ")\n");
    if (same != static_cast<int64_t>(want.size())) {
      std::printf("%s", run_summary.c_str());
      return error(ErrorCode::runtime_error, cpu, ": the firmware's logits differ from the host int8 reference on ",
                   want.size() - static_cast<size_t>(same), " inputs:\n", r.output);
    }
  }
  std::printf("%s", run_summary.c_str());
  std::ofstream rep(out + "/report.txt", std::ios::app);
  rep << run_summary;
  if (!rep) return error(ErrorCode::io_error, out, "/report.txt: cannot write");
  return Status::ok();
}

Status codegen_hexagon(const Args& a) {
  const std::string out = *a.get("out");
  RLX_ASSIGN_OR_RETURN(Prepared pr, prepare(a, Target::hexagon));
  RLX_TRY(targets::hexagon::emit_project(pr.q, pr.ins, out, pr.summary));
  std::printf("%s\n%s", pr.q.report.summary().c_str(), pr.summary.c_str());
  std::printf("wrote %s: model.c (%zu layers, %lld-byte arena), main.c with %zu embedded inputs, Makefile, report.txt\n",
              out.c_str(), pr.q.layers.size(), static_cast<long long>(pr.q.arena_bytes()), pr.ins.inputs.size());
  if (!a.has("run")) return Status::ok();
  RLX_ASSIGN_OR_RETURN(targets::hexagon::QemuRun r, targets::hexagon::build_and_run(out));
  if (r.logits.size() != pr.want.size())
    return error(ErrorCode::runtime_error, "model.elf reported ", r.logits.size(), " inputs, expected ", pr.want.size());
  int64_t same = 0;
  for (size_t i = 0; i < pr.want.size(); ++i) same += r.logits[i] == pr.want[i];
  const std::string run_summary =
      cat("\nbuilt with clang --target=hexagon -mv66 -mhvx (128-byte HVX), run in qemu-hexagon: ", r.text,
          " bytes of code and constants, ", r.hvx_packets, " HVX vrmpy instructions in the binary; logits bit-identical "
          "to the host reference on ", same, " of ", pr.want.size(), " inputs; ", r.packets_per_inference,
          " instruction packets per inference (QEMU, single-stepped; no cycle model)\n");
  std::printf("%s", run_summary.c_str());
  if (same != static_cast<int64_t>(pr.want.size()))
    return error(ErrorCode::runtime_error, "the Hexagon logits differ from the host int8 reference on ",
                 pr.want.size() - static_cast<size_t>(same), " inputs:\n", r.output);
  std::ofstream rep(out + "/report.txt", std::ios::app);
  rep << run_summary;
  if (!rep) return error(ErrorCode::io_error, out, "/report.txt: cannot write");
  return Status::ok();
}

Status codegen_fpga(const Args& a) {
  const std::string out = *a.get("out");
  RLX_ASSIGN_OR_RETURN(int64_t lanes, a.integer("lanes", 8, 1, INT32_MAX));
  targets::fpga::Options o;
  o.lanes = static_cast<int32_t>(std::min<int64_t>(lanes, 1 << 20));
  RLX_ASSIGN_OR_RETURN(Prepared pr, prepare(a, Target::fpga));
  RLX_ASSIGN_OR_RETURN(targets::fpga::Layout lay, targets::fpga::layout(pr.q, o));
  RLX_TRY(targets::fpga::emit_design(pr.q, o, pr.ins.inputs, out, pr.summary));
  std::printf("%s\n%s", pr.q.report.summary().c_str(), pr.summary.c_str());
  std::printf("wrote %s: rlx_fpga_top.sv (%zu layers, %d MAC lanes, %lld cycles per inference), weights.mem "
              "(%lld x %d bits), bias.mem, mult.mem, shift.mem, inputs.mem (%zu inputs), tb.cpp, Makefile, report.txt\n",
              out.c_str(), pr.q.layers.size(), lay.lanes, static_cast<long long>(lay.cycles_estimate),
              static_cast<long long>(lay.weight_words), 8 * lay.lanes, pr.ins.inputs.size());
  if (!a.has("run")) return Status::ok();
  RLX_ASSIGN_OR_RETURN(targets::fpga::SimRun r, targets::fpga::simulate(out));
  if (r.logits.size() != pr.want.size())
    return error(ErrorCode::runtime_error, "the simulation reported ", r.logits.size(), " inputs, expected ", pr.want.size());
  int64_t same = 0;
  for (size_t i = 0; i < pr.want.size(); ++i) same += r.logits[i] == pr.want[i];
  std::string run_summary = cat("\nsimulated with Verilator: logits bit-identical to the host reference on ", same, " of ",
                                pr.want.size(), " inputs; ", r.cycles.empty() ? 0 : r.cycles[0], " cycles per inference\n");
  if (same != static_cast<int64_t>(pr.want.size())) {
    std::printf("%s", run_summary.c_str());
    return error(ErrorCode::runtime_error, "the simulated logits differ from the host int8 reference on ",
                 pr.want.size() - static_cast<size_t>(same), " inputs:\n", r.output);
  }
  if (std::string why = targets::fpga::yosys_missing(); !why.empty()) {
    run_summary += cat("not synthesized: ", why, "\n");
  } else {
    RLX_ASSIGN_OR_RETURN(targets::fpga::SynthStats st, targets::fpga::synthesize(out));
    std::string mults;
    for (const auto& [shape, n] : st.multiplier_shapes) mults += cat(mults.empty() ? "" : ", ", n, " of ", shape);
    run_summary += cat("synthesized with yosys (generic synth, memories kept as memories): ", st.cells, " cells, ",
                       st.multipliers, " multipliers (", mults, "), ", st.memories, " memories, ", st.memory_bits,
                       " memory bits\n");
  }
  std::printf("%s", run_summary.c_str());
  std::ofstream rep(out + "/report.txt", std::ios::app);
  rep << run_summary;
  if (!rep) return error(ErrorCode::io_error, out, "/report.txt: cannot write");
  return Status::ok();
}

}  // namespace

int cmd_codegen(int argc, char** argv) {
  auto a = parse_args(argc, argv, 2, {"run", "ptq"}, {"out", "calib", "eval", "inputs", "data", "seed", "arch", "lanes"});
  if (!a) return report_error(a.status());
  const char* usage = "usage: rlx codegen cortex-m|hexagon|fpga MODEL --out DIR [--calib N] [--eval N] [--inputs N] [--data DIR] "
                      "[--lanes P (fpga)] [--ptq] [--run]";
  if (a->positional.size() != 2 || !a->get("out")) return report_error(error(ErrorCode::invalid_argument, usage));
  const std::string& target = a->positional[0];
  if (target != "cortex-m" && target != "hexagon" && target != "fpga")
    return report_error(error(ErrorCode::invalid_argument, "unknown target '", target, "' (expected cortex-m, hexagon or fpga); ", usage));
  if (target != "fpga" && a->get("lanes"))
    return report_error(error(ErrorCode::invalid_argument, "--lanes is an option of the fpga target"));
  Status s = target == "fpga" ? codegen_fpga(*a) : target == "hexagon" ? codegen_hexagon(*a) : codegen_cortex_m(*a);
  if (!s.is_ok()) return report_error(s);
  return kOk;
}

}  // namespace rlx::cli
