// rlx's side of bench/minilm.py: loads a BERT folder, compiles it for the CPU at one batch
// and sequence length, then answers commands on stdin, one per line, so the driver can
// interleave it with the peers on a shared machine:
//   run N      runs N forwards, prints one JSON line {"ms": [...], "cpu_ms": [...]} (wall time,
//              and the process's CPU time, which on one thread ignores time spent descheduled)
//   emb        prints the first row of the output, {"emb": [...]}
//   quit
// Usage: rlx_bench_minilm_server MODEL_DIR BATCH SEQ IDS.bin MASK.bin TYPES.bin
// (the .bin files hold BATCH*SEQ little-endian int64 values).
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "models/bert.h"
#include "rlx/compile.h"

using namespace rlx;

static Expected<Tensor> read_i64(const std::string& path, int64_t b, int64_t s) {
  Tensor t = Tensor::zeros(DType::i64, {b, s});
  std::ifstream f(path, std::ios::binary);
  if (!f.read(reinterpret_cast<char*>(t.data<int64_t>()), static_cast<std::streamsize>(b * s * 8)))
    return error(ErrorCode::io_error, "cannot read ", b * s, " int64 values from ", path);
  return t;
}

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s MODEL_DIR BATCH SEQ IDS.bin MASK.bin TYPES.bin\n", argv[0]);
    return 2;
  }
  const int64_t b = std::atoll(argv[2]), s = std::atoll(argv[3]);
  auto m = models::load_bert_folder(argv[1]);
  if (!m) {
    std::fprintf(stderr, "%s\n", m.status().to_string().c_str());
    return 1;
  }
  std::vector<Tensor> inputs;
  for (int i = 4; i < 7; ++i) {
    auto t = read_i64(argv[i], b, s);
    if (!t) {
      std::fprintf(stderr, "%s\n", t.status().to_string().c_str());
      return 1;
    }
    inputs.push_back(*t);
  }
  // RLX_BENCH_DEVICE picks another host device (bench/minilm.py's rlx-oneapi engine)
  const char* dev = std::getenv("RLX_BENCH_DEVICE");
  auto model = Model::compile(m->graph, {.device = dev ? dev : "cpu", .dims = {{"batch", b}, {"seq", s}}});
  if (!model) {
    std::fprintf(stderr, "%s\n", model.status().to_string().c_str());
    return 1;
  }
  auto var = (*model)->variant_for(inputs);
  if (!var) {
    std::fprintf(stderr, "%s\n", var.status().to_string().c_str());
    return 1;
  }
  Executable& ex = *(*var)->executable;
  auto outs = ex.run(inputs);
  if (!outs) {
    std::fprintf(stderr, "%s\n", outs.status().to_string().c_str());
    return 1;
  }
  std::printf("{\"ready\": true, \"summary\": \"%s\"}\n", (*var)->report.summary().c_str());
  std::fflush(stdout);
  std::string cmd;
  while (std::cin >> cmd) {
    if (cmd == "run") {
      int n = 0;
      std::cin >> n;
      auto cpu_now = [] {
        timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
      };
      std::string line = "{\"ms\": [", cpu = "], \"cpu_ms\": [";
      for (int i = 0; i < n; ++i) {
        const double c0 = cpu_now();
        auto t0 = std::chrono::steady_clock::now();
        Status st = ex.run_into(inputs, *outs);
        auto t1 = std::chrono::steady_clock::now();
        cpu += (i ? ", " : "") + std::to_string(cpu_now() - c0);
        if (!st.is_ok()) {
          std::fprintf(stderr, "%s\n", st.to_string().c_str());
          return 1;
        }
        line += (i ? ", " : "") + std::to_string(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      std::printf("%s%s]}\n", line.c_str(), cpu.c_str());
    } else if (cmd == "emb") {
      const Tensor& e = (*outs)[0];
      const int64_t d = e.sizes().back();
      std::string line = "{\"emb\": [";
      for (int64_t j = 0; j < d; ++j) line += (j ? ", " : "") + std::to_string(e.get_f64(j));
      std::printf("%s]}\n", line.c_str());
    } else if (cmd == "quit") {
      break;
    }
    std::fflush(stdout);
  }
  return 0;
}
