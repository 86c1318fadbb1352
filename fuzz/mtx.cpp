// libFuzzer target: rlx::sparse::parse_matrix_market on arbitrary bytes. Beyond "no crash, no
// sanitizer report", an accepted file must give a COO whose entries are inside its size and
// convert to a valid CSR.
#include <cstdint>
#include <string_view>

#include "rlx/sparse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto coo = rlx::sparse::parse_matrix_market(text, "fuzz.mtx");
  if (!coo) {
    if (coo.status().message().find("fuzz.mtx") == std::string::npos) __builtin_trap();
    return 0;
  }
  if (coo->row.size() != coo->col.size() || coo->row.size() != coo->val.size()) __builtin_trap();
  for (size_t k = 0; k < coo->row.size(); ++k)
    if (coo->row[k] < 0 || coo->row[k] >= coo->rows || coo->col[k] < 0 || coo->col[k] >= coo->cols) __builtin_trap();
  auto csr = rlx::sparse::to_csr(*coo);
  if (!csr || !rlx::sparse::validate(*csr).is_ok()) __builtin_trap();
  return 0;
}
