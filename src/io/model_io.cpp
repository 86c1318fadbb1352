#include "rlx/model_io.h"

#include <sys/stat.h>

#include <unistd.h>

#include <cstring>

#include "loaders.h"
#include "models/bert.h"
#include "models/decoder.h"
#include "rlx/ir_text.h"
#include "rlx/mapped_file.h"
#include "support/json_fields.h"
#include "rlx/verify.h"

namespace rlx {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The first n bytes of the regular file at `path` (fewer when it is shorter).
Expected<std::string> first_bytes(const std::string& path, size_t n) {
  RLX_ASSIGN_OR_RETURN(int fd, open_regular_file(path));
  std::string b(n, '\0');
  const ssize_t got = ::read(fd, b.data(), n);
  ::close(fd);
  b.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return b;
}

}  // namespace

Expected<LoadedModel> load_model(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return error(ErrorCode::io_error, "no such file or folder: ", path);
  if (S_ISDIR(st.st_mode)) {
    // the keys that say what the folder is must have their types (transformers refuses others)
    struct stat cs;
    const std::string config = path + "/config.json";
    if (stat(config.c_str(), &cs) == 0) {
      RLX_ASSIGN_OR_RETURN(nlohmann::json j, json::read_object_file(config));
      const json::Fields f(j, config);
      std::vector<std::string> architectures;
      RLX_TRY(json::require_string(f, "model_type"));
      RLX_TRY(f.read("architectures", architectures));
    }
    if (models::is_bert_folder(path)) {
      // the graph only: info, explain, run and bench never tokenize
      RLX_ASSIGN_OR_RETURN(models::BertModel b, models::load_bert_folder(path, models::BertOutput::sentence_embedding, {}, false));
      LoadedModel m;
      m.graph = std::move(b.graph);
      m.format = "Hugging Face folder (BERT, sentence embeddings)";
      m.metadata["hidden_size"] = std::to_string(b.config.hidden);
      m.metadata["num_hidden_layers"] = std::to_string(b.config.layers);
      return m;
    }
    if (models::is_decoder_model(path)) {
      // the prefill step graph (last-position logits, a 256-slot cache); rlx generate runs both steps
      RLX_ASSIGN_OR_RETURN(models::DecoderWeights w, models::load_decoder_folder(path));
      LoadedModel m;
      RLX_ASSIGN_OR_RETURN(m.graph, models::build_decoder(w, models::standalone_step_options()));
      m.format = cat("Hugging Face folder (", models::family_name(w.config.family), " decoder, prefill step with a 256-slot KV cache)");
      m.metadata["hidden_size"] = std::to_string(w.config.hidden);
      m.metadata["num_hidden_layers"] = std::to_string(w.config.layers);
      m.metadata["num_attention_heads"] = std::to_string(w.config.heads);
      m.metadata["num_key_value_heads"] = std::to_string(w.config.kv_heads);
      m.metadata["vocab_size"] = std::to_string(w.config.vocab_size);
      return m;
    }
    return error(ErrorCode::unsupported, path, ": not a model folder rlx knows (config.json of a BERT or decoder model)");
  }
  if (!S_ISREG(st.st_mode)) return error(ErrorCode::io_error, path, ": not a regular file; rlx reads models only from regular files");
  if (ends_with(path, ".rlx")) {
    LoadedModel m;
    RLX_ASSIGN_OR_RETURN(m.graph, parse_graph_file(path));
    m.format = "rlx text IR";
    RLX_TRY(verify_graph(m.graph).with_context(path));
    return m;
  }
  RLX_ASSIGN_OR_RETURN(const std::string head, first_bytes(path, 8));
  if (head.size() >= 4 && std::memcmp(head.data(), "GGUF", 4) == 0) return io::load_gguf_model(path);
  if (ends_with(path, ".gguf")) return io::load_gguf_model(path);
  if (ends_with(path, ".safetensors") || ends_with(path, ".safetensors.index.json"))
    return io::load_safetensors_model(path);
  if (ends_with(path, ".onnx")) return io::load_onnx_model(path);
  // version 2 starts with the magic RTEN; version 1 has only the suffix (and RTEN at bytes 4-7)
  if (ends_with(path, ".rten") || (head.size() >= 4 && std::memcmp(head.data(), "RTEN", 4) == 0))
    return io::load_rten_model(path);
  return error(ErrorCode::unsupported, path,
               ": unrecognized model format (expected .rlx, .onnx, .rten, .gguf, .safetensors or a model folder)");
}

}  // namespace rlx
