// rlx.embed, rlx.generate and rlx.train: the functions behind the program's verbs
// (tools/rlx/entry.h), so Python and `rlx embed/generate/train` compute the same thing.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "entry.h"

namespace rlx::py_bind {

namespace {

// Runs f with the GIL released; its Expected error becomes rlx.Error.
template <class F>
auto without_gil(F&& f) {
  decltype(f()) r = [&] {
    py::gil_scoped_release nogil;
    return f();
  }();
  return unwrap(std::move(r));
}

}  // namespace

void bind_entry(py::module_& m) {
  m.def(
      "embed",
      [](const std::string& model_dir, const std::vector<std::string>& texts, const std::string& device,
         const std::string& policy, int64_t batch, const py::object& max_length) {
        cli::EmbedOptions o;
        o.device = device;
        o.policy = unwrap(DispatchPolicy::parse(policy));
        o.batch = batch;
        if (!max_length.is_none()) o.max_length = max_length.cast<int64_t>();
        cli::EmbedResult r = without_gil([&] { return cli::embed_texts(model_dir, texts, o); });
        return array_from_tensor(r.embeddings);
      },
      py::arg("model_dir"), py::arg("texts"), py::kw_only(), py::arg("device") = "cpu",
      py::arg("policy") = "prefer-native", py::arg("batch") = 32, py::arg("max_length") = py::none(),
      "Sentence embeddings [len(texts), hidden] (float32) from a BERT-family Hugging Face folder, as "
      "`rlx embed` computes them.");

  py::class_<cli::GenerateResult>(m, "GenerateResult", "What rlx.generate produced, per prompt, and its timing.")
      .def_readonly("tokens", &cli::GenerateResult::tokens, "New token ids, one list per prompt.")
      .def_readonly("prompt_tokens", &cli::GenerateResult::prompt_tokens)
      .def_property_readonly("texts",
                             [](const cli::GenerateResult& r) {
                               py::list l;
                               for (const std::string& s : r.texts) l.append(utf8_str(s));
                               return l;
                             },
                             "The new tokens decoded, one str per prompt (empty without a tokenizer).")
      .def_property_readonly("text",
                             [](const cli::GenerateResult& r) -> py::object {
                               if (r.texts.empty()) return py::none();
                               return utf8_str(r.texts[0]);
                             },
                             "texts[0], or None without a tokenizer.")
      .def_readonly("prefill_s", &cli::GenerateResult::prefill_s)
      .def_readonly("decode_s", &cli::GenerateResult::decode_s)
      .def_readonly("compile_s", &cli::GenerateResult::compile_s)
      .def_readonly("decode_steps", &cli::GenerateResult::decode_steps)
      .def_property_readonly("decode_tokens_per_s", &cli::GenerateResult::decode_tokens_per_s)
      .def_property_readonly("prefill_tokens_per_s", &cli::GenerateResult::prefill_tokens_per_s)
      .def("__repr__", [](const cli::GenerateResult& r) {
        return "rlx.GenerateResult(" + std::to_string(r.tokens.size()) + " prompts, " +
               std::to_string(r.tokens.empty() ? 0 : r.tokens[0].size()) + " tokens for the first)";
      });

  m.def(
      "generate",
      [](const std::string& model, const py::object& prompt, int64_t n, double temp, int64_t top_k, double top_p,
         uint64_t seed, const std::string& device, int64_t context, bool ignore_eos, const py::object& stream) {
        cli::GenerateOptions o;
        // a str, a list of str, a list of ints (one prompt of ids) or a list of lists of ints
        if (py::isinstance<py::str>(prompt)) {
          o.prompts.push_back(prompt.cast<std::string>());
        } else {
          py::list l = py::list(prompt);
          if (l.size() > 0 && py::isinstance<py::str>(l[0])) {
            o.prompts = l.cast<std::vector<std::string>>();
          } else if (l.size() > 0 && py::isinstance<py::int_>(l[0])) {
            o.prompt_tokens.push_back(l.cast<std::vector<int64_t>>());
          } else {
            o.prompt_tokens = l.cast<std::vector<std::vector<int64_t>>>();
          }
        }
        o.n = n;
        o.sampling = {temp, top_k, top_p};
        o.seed = seed;
        o.device = device;
        o.context = context;
        o.ignore_eos = ignore_eos;
        if (!stream.is_none()) {
          py::object cb = stream;
          o.stream = [cb](const std::string& piece) {
            py::gil_scoped_acquire gil;
            cb(py::bytes(piece));
          };
        }
        return without_gil([&] { return cli::generate_text(model, o); });
      },
      py::arg("model"), py::arg("prompt"), py::kw_only(), py::arg("n") = 32, py::arg("temp") = 0.0,
      py::arg("top_k") = 0, py::arg("top_p") = 1.0, py::arg("seed") = 0, py::arg("device") = "cpu",
      py::arg("context") = 0, py::arg("ignore_eos") = false, py::arg("stream") = py::none(),
      "Generates up to n tokens per prompt with a Qwen3-family model (Hugging Face folder or GGUF file), as "
      "`rlx generate` does. prompt: a str, a list of str, a list of token ids or a list of such lists. "
      "temp 0 is greedy. stream(bytes) is called with each piece of text as it is made (one prompt only).");

  py::class_<cli::TrainResult>(m, "TrainResult", "The outcome of rlx.train.")
      .def_property_readonly("records",
                             [](const cli::TrainResult& r) {
                               return py::module_::import("json").attr("loads")(r.records.dump());
                             },
                             "One dict per epoch (loss, images/s, test accuracy...), as --json writes them.")
      .def_property_readonly("parameters",
                             [](const cli::TrainResult& r) {
                               py::dict d;
                               for (const auto& [name, t] : r.parameters) d[py::str(name)] = array_from_tensor(t.clone());
                               return d;
                             },
                             "The trained parameters by name (copies).")
      .def_readonly("test_accuracy", &cli::TrainResult::test_accuracy)
      .def_readonly("test_loss", &cli::TrainResult::test_loss);

  m.def(
      "_train_args",
      [](const std::vector<std::string>& args) {
        cli::TrainOptions o = unwrap(cli::parse_train_args(args));
        return without_gil([&] { return cli::train_mnist(o); });
      },
      py::arg("args"),
      "Trains with the arguments of `rlx train` (after the verb). rlx.train builds them from keywords.");
}

}  // namespace rlx::py_bind
