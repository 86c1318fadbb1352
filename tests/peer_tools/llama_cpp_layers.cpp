// llama.cpp's intermediate values for a prompt, as the oracle of rlx's layer-by-layer
// comparison: links node-llama-cpp's prebuilt libllama (built against the headers of the
// llama.cpp release it ships as a git bundle, tests/models/CMakeLists.txt) and reads the
// residual stream after every layer through the scheduler's eval callback, as llama.cpp's own
// llama-eval-callback tool does (the tensors its graphs name "l_out-N").
//
//   rlx_llama_cpp_layers MODEL.gguf 1,2,3 LAYERS.npy LOGITS.npy
// LAYERS.npy: f32 [layers, tokens, hidden]; LOGITS.npy: f32 [tokens, vocab], the logits after
// every prompt position. A context of 512 tokens, one thread, the KV cache in f32 and no flash attention, so that f32
// weights are computed in f32 throughout. Exit status 1 with a message on any failure.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

namespace {

struct Capture {
  int layers = 0, hidden = 0, tokens = 0;
  std::vector<float> out;  // [layers, tokens, hidden]
  std::vector<int> seen;   // per layer
  std::string error;
};

// The layer index of a tensor named "l_out-N", or -1.
int layer_of(const char* name) {
  if (std::strncmp(name, "l_out-", 6) != 0) return -1;
  char* end = nullptr;
  const long l = std::strtol(name + 6, &end, 10);
  return end != name + 6 && *end == '\0' ? static_cast<int>(l) : -1;
}

bool on_tensor(ggml_tensor* t, bool ask, void* user) {
  auto* c = static_cast<Capture*>(user);
  const int l = layer_of(t->name);
  if (ask) return l >= 0;
  if (l < 0 || l >= c->layers) return true;
  if (t->type != GGML_TYPE_F32 || t->ne[0] != c->hidden || t->ne[1] != c->tokens || t->ne[2] != 1 || t->ne[3] != 1) {
    c->error = std::string("unexpected shape or type of ") + t->name;
    return true;
  }
  // (copied row by row: the tensor may be a strided view)
  for (int i = 0; i < c->tokens; ++i)
    ggml_backend_tensor_get(t, c->out.data() + (static_cast<size_t>(l) * c->tokens + i) * c->hidden, i * t->nb[1],
                            sizeof(float) * c->hidden);
  ++c->seen[l];
  return true;
}

bool write_npy(const std::string& path, const std::vector<float>& data, const std::vector<long>& shape) {
  std::string dims;
  for (long d : shape) dims += std::to_string(d) + ",";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const unsigned short len = static_cast<unsigned short>(header.size());
  bool ok = std::fwrite("\x93NUMPY\x01\x00", 1, 8, f) == 8 && std::fwrite(&len, 2, 1, f) == 1 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(data.data(), sizeof(float), data.size(), f) == data.size();
  return std::fclose(f) == 0 && ok;
}

void quiet(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL.gguf 1,2,3 LAYERS.npy LOGITS.npy\n", argv[0]);
    return 2;
  }
  std::vector<llama_token> ids;
  for (const char* p = argv[2]; *p;) {
    char* end = nullptr;
    ids.push_back(static_cast<llama_token>(std::strtol(p, &end, 10)));
    if (end == p) {
      std::fprintf(stderr, "bad token list '%s'\n", argv[2]);
      return 2;
    }
    p = *end == ',' ? end + 1 : end;
  }
  llama_log_set(quiet, nullptr);
  // the CPU backends are separate libraries next to libllama (one per instruction set)
  ggml_backend_load_all_from_path(RLX_LLAMA_CPP_BINS);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "llama.cpp cannot load %s\n", argv[1]);
    return 1;
  }
  Capture cap;
  cap.layers = llama_model_n_layer(model);
  cap.hidden = llama_model_n_embd(model);
  cap.tokens = static_cast<int>(ids.size());
  cap.out.assign(static_cast<size_t>(cap.layers) * cap.tokens * cap.hidden, 0.0f);
  cap.seen.assign(cap.layers, 0);
  llama_context_params cp = llama_context_default_params();
  // a context of 512 as tests/models/llama_cpp_peer.mjs creates (LongRoPE picks its factors by it)
  cp.n_ctx = static_cast<uint32_t>(ids.size() < 512 ? 512 : ids.size());
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(ids.size());
  cp.n_threads = cp.n_threads_batch = 1;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.cb_eval = on_tensor;
  cp.cb_eval_user_data = &cap;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "llama.cpp cannot create a context for %s\n", argv[1]);
    return 1;
  }
  llama_batch batch = llama_batch_init(cap.tokens, 0, 1);
  for (int i = 0; i < cap.tokens; ++i) {
    batch.token[i] = ids[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;  // every position's logits, so the last layer keeps every row
  }
  batch.n_tokens = cap.tokens;
  if (llama_decode(ctx, batch) != 0) {
    std::fprintf(stderr, "llama_decode failed\n");
    return 1;
  }
  if (!cap.error.empty()) {
    std::fprintf(stderr, "%s\n", cap.error.c_str());
    return 1;
  }
  for (int l = 0; l < cap.layers; ++l)
    if (cap.seen[l] != 1) {
      std::fprintf(stderr, "llama.cpp's graph gave l_out-%d %d times\n", l, cap.seen[l]);
      return 1;
    }
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::vector<float> logits(static_cast<size_t>(cap.tokens) * vocab);
  for (int i = 0; i < cap.tokens; ++i) std::memcpy(logits.data() + static_cast<size_t>(i) * vocab, llama_get_logits_ith(ctx, i), sizeof(float) * vocab);
  const bool ok = write_npy(argv[3], cap.out, {cap.layers, cap.tokens, cap.hidden}) &&
                  write_npy(argv[4], logits, {cap.tokens, vocab});
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  if (!ok) std::fprintf(stderr, "cannot write %s or %s\n", argv[3], argv[4]);
  return ok ? 0 : 1;
}
