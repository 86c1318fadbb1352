// rlx/mapped_file.h: files mapped into memory, as tensor storage that costs no copy, and the
// checked opening every loader of model files goes through.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "rlx/tensor.h"

namespace rlx {

// Maps the whole file copy-on-write (reads come from the page cache; a write to a tensor
// changes only this process's copy, never the file). An empty file maps to an empty storage.
// Errors name the path.
Expected<std::shared_ptr<Storage>> map_file(const std::string& path);

// Opens `path` for reading and returns the descriptor (O_CLOEXEC), or an io_error naming the
// path when it is missing or not a regular file. The open does not block: a FIFO where a model
// file belongs would otherwise wait forever for a writer. The caller closes the descriptor.
Expected<int> open_regular_file(const std::string& path);

// OK when `path` is a regular file that can be opened for reading; the error of
// open_regular_file otherwise. For readers that go on to open the file their own way.
Status require_regular_file(const std::string& path);

// The whole content of the regular file at `path`, refused (format_error) when it is larger
// than `max_bytes`; errors name the path. For the text files of models (JSON, vocab.txt, text
// IR), read whole.
Expected<std::string> read_regular_file(const std::string& path, uint64_t max_bytes);

// Writes a file by calling `write` on a temporary file beside `path` and renaming it over
// `path` once it is complete: a reader that has the old file mapped keeps its pages (truncating
// a mapped file in place makes them fault: `rlx convert m.gguf m.gguf` lost its input so), and
// a failed write leaves the old file as it was. `write` returns the error of a failed write;
// errors name the file.
Status write_file_via_rename(const std::string& path, const std::function<Status(std::FILE*, const std::string& tmp)>& write);

}  // namespace rlx
