#include "rlx/model_io.h"

#include <sys/stat.h>

#include "rlx/ir_text.h"
#include "rlx/verify.h"

namespace rlx {
namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

Expected<LoadedModel> load_model(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return error(ErrorCode::io_error, "no such file or folder: ", path);
  LoadedModel m;
  if (ends_with(path, ".rlx") || ends_with(path, ".txt")) {
    RLX_ASSIGN_OR_RETURN(m.graph, parse_graph_file(path));
    m.format = "rlx text IR";
    RLX_TRY(verify_graph(m.graph).with_context(path));
    return m;
  }
  return error(ErrorCode::unsupported, path, ": unrecognized model format (expected a .rlx text IR file)");
}

}  // namespace rlx
