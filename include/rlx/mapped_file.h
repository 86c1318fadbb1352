// rlx/mapped_file.h: files mapped into memory, as tensor storage that costs no copy.
#pragma once

#include <memory>
#include <string>

#include "rlx/tensor.h"

namespace rlx {

// Maps the whole file copy-on-write (reads come from the page cache; a write to a tensor
// changes only this process's copy, never the file). An empty file maps to an empty storage.
// Errors name the path.
Expected<std::shared_ptr<Storage>> map_file(const std::string& path);

}  // namespace rlx
