// rlx: the command-line program. `rlx help VERB` documents each verb.
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include "cli.h"

namespace rlx::cli {

const std::vector<Verb>& verbs() {
  static const std::vector<Verb> v = {
      {"devices", "list devices, available or not and why", "rlx devices", cmd_devices},
      {"info", "format, inputs, outputs, ops, parameters and metadata of a model", "rlx info MODEL", cmd_info},
      {"explain", "the dispatch report: how each node runs on a device; exit 1 if any node is illegal",
       "rlx explain MODEL [--device D] [--policy P] [--dims k=v,...] [--precision P] [--json FILE] [--kernels]", cmd_explain},
      {"run", "compile and run a model, print the dispatch summary, outputs and time",
       "rlx run MODEL [--device D] [--policy P] [--dims k=v,...] [--input NAME=FILE.npy]... [--out DIR] [--seed S] "
       "[--tp T] [--pp P [--micro-batches M]] (under mpirun -np T*P; --tp: BERT and decoder models, --pp: graphs with layer ends)",
       cmd_run},
      {"bench", "latency (p50, p90) and throughput over batch and sequence sizes",
       "rlx bench MODEL [--device D] [--batch 1,8,32] [--seq 128] [--runs N] [--warmup N] [--format md|json|csv] "
       "[--dims k=v,...]",
       cmd_bench},
      {"convert", "convert weights between safetensors and GGUF, optionally quantizing 2-D weights; ONNX models to rten",
       "rlx convert IN OUT [--quant Q8_0|Q4_0|Q4_K|Q6_K]   (OUT ends in .gguf, .safetensors, or .rten from an .onnx IN)", cmd_convert},
      {"quantize", "post-training quantization: BERT folders to int8 weights (static activation scales with --calib), "
       "Qwen3 folders to GGUF q8_0/q4_0/q4_k/int4-g128, BERT folders to weight-only int4 blocks (int4-g32/int4-g128)",
       "rlx quantize IN_DIR OUT --scheme int8|q8_0|q4_0|q4_k|int4-g32[-asym]|int4-g128[-asym] "
       "[--calib SENTENCES.txt [--calib-method minmax|percentile] [--percentile 99.99]]", cmd_quantize},
      {"embed", "sentence embeddings with a BERT-family model folder",
       "rlx embed MODEL_DIR TEXT... [--device D] [--batch N] [--max-length L] [--out FILE.npy|FILE.json] [--quiet] "
       "[--tp T] [--pp P [--micro-batches M]] (under mpirun -np T*P)  (docs/distributed.md)",
       cmd_embed},
      {"generate", "text generation with a decoder model (Llama, Mistral, Qwen2/3, Gemma 2/3, Phi-3; Hugging Face folder or GGUF), streaming, with tokens/s",
       "rlx generate MODEL (--prompt TEXT | --tokens 1,2,3)... [-n N] [--temp T --top-k K --top-p P --seed S] "
       "[--json FILE] [--device D] [--context C] [--runs R] [--ignore-eos] [--quiet] [--prompt-top1] [--dump-layers FILE.npy] [--tp T] [--pp P [--micro-batches M]] (under mpirun -np T*P)  "
       "(docs/generation.md, docs/distributed.md)",
       cmd_generate},
      {"serve", "an OpenAI-compatible HTTP server (completions, chat, embeddings) with continuous batching",
       "rlx serve MODEL... (PATH or NAME=PATH) [--host 127.0.0.1] [--port 8080 (0: any)] [--api-key KEY] [--device D] "
       "[--precision P] [--parallel-slots S] [--max-context T] [--kv-cache-tokens N] [--kv-block-size B] [--no-prefix-cache] [--max-batch N] [--max-queue Q] [--prefill-chunk C] "
       "[--request-timeout S] [--idle-timeout S] [--shutdown-timeout S] [--max-body BYTES] [--threads N] [--tp T] [--pp P [--micro-batches M]] "
       "(under mpirun -np T*P)  (docs/serve.md)",
       cmd_serve},
      {"make-model", "write a deterministic random-weight model in its real layout (offline tests, benchmarks)",
       "rlx make-model minilm|FAMILY-tiny (llama, mistral, qwen2, qwen3, gemma2, gemma3_text, phi3) --out DIR [--seed S] [--gguf] [--gguf-type f16|f32|q8_0|q4_0|q4_k|q6_k] [--vocab V] [--layers L] [--hidden H --heads Q --kv-heads K --intermediate I]",
       cmd_make_model},
      {"train", "train a classifier (MNIST MLP or tiny CNNs): one compiled step for forward, backward and update",
       "rlx train mnist --arch mlp|tinyconv|dsconv [--epochs E] [--batch B] [--lr LR] [--optimizer sgd|adam|adamw] "
       "[--data DIR | --synthetic] [--json FILE] [--save FILE.safetensors] [--seed S] [--device D] [--qat int8] [--init FILE] "
       "[--dp D [--bucket-kb K]] [--pp P [--micro-batches M] [--pp-schedule gpipe|1f1b]] (under mpirun -np D*P) "
       "[--tp T] (with --dp/--pp: mpirun -np T*D*P)  "
       "(docs/training.md, docs/distributed.md)",
       cmd_train},
      {"codegen", "ahead-of-time full-integer int8 inference: C for Cortex-M (QEMU-checked with --run), "
       "SystemVerilog for FPGAs (Verilator-checked and Yosys-synthesized with --run)",
       "rlx codegen cortex-m|hexagon|fpga MODEL.safetensors --out DIR [--calib N] [--eval N] [--inputs N] [--data DIR] [--seed S] "
       "[--arch mlp|tinyconv|dsconv] [--lanes P (fpga, 8)] [--ptq] [--run]; a checkpoint trained with --qat int8 brings its "
       "activation scales (--ptq calibrates instead)  (docs/targets.md)",
       cmd_codegen},
      {"splat", "3D Gaussian splatting: render a 3DGS .ply scene to a PNG, or fit Gaussians to a synthetic image",
       "rlx splat render SCENE.ply --camera ex,ey,ez,tx,ty,tz[,fov[,upx,upy,upz]] [--width W] [--height H] "
       "[--out image.png] [--background r,g,b] [--device cpu|ref|opencl|cuda]\n"
       "  rlx splat fit --out DIR [--gaussians N] [--size S] [--steps N] [--lr LR] [--seed S]  (docs/splatting.md)",
       cmd_splat},
  };
  return v;
}

namespace {
int help(const char* verb) {
  if (verb) {
    for (const Verb& v : verbs())
      if (std::strcmp(v.name, verb) == 0) {
        std::printf("%s\n\n  %s\n", v.usage, v.summary);
        return kOk;
      }
    std::fprintf(stderr, "rlx: unknown verb '%s'\n", verb);
    return kUsage;
  }
  std::printf("rlx: a tensor compiler and runtime\n\nusage: rlx VERB [arguments]\n\n");
  for (const Verb& v : verbs()) std::printf("  %-10s %s\n", v.name, v.summary);
  std::printf("\n`rlx help VERB` for the arguments of one verb.\n");
  return kOk;
}
}  // namespace

}  // namespace rlx::cli

int main(int argc, char** argv) {
  using namespace rlx::cli;
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0)
    return help(argc >= 3 ? argv[2] : nullptr);
  for (const Verb& v : verbs())
    if (std::strcmp(v.name, argv[1]) == 0) {
      for (int i = 2; i < argc; ++i)
        if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return help(v.name);
      // The verbs return errors as values; an exception reaching here is a bug or memory
      // running out inside a library. Say so on one line rather than abort.
      try {
        return v.run(argc, argv);
      } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "error: rlx %s: out of memory\n", v.name);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "error: rlx %s: internal error (please report): %.300s\n", v.name, e.what());
      }
      return 1;
    }
  std::fprintf(stderr, "error: unknown verb '%.60s' (see `rlx help`)\n", argv[1]);
  return kUsage;
}
