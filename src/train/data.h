// Training data: the MNIST IDX format (plain or gzip), a deterministic synthetic stand-in of
// the same shape, and shuffled batching.
//
// IDX (http://yann.lecun.com/exdb/mnist/): a 4-byte magic 0x00 0x00 <type> <ndim>, ndim
// big-endian u32 dimensions, then the elements row-major. rlx reads type 0x08 (unsigned byte)
// with 3 dims for images [N, rows, cols] and 1 dim for labels [N]. A file is read whole and
// validated before use: the magic, the type, the number of dims, non-zero dims, the element
// count (checked multiplication, at most 2^31 bytes) against the file's length (plain) or the
// decompressed length (gzip, detected by its 1f 8b signature and inflated with the system's
// zlib, loaded at run time), image and label counts equal, labels below the class count.
// Errors are ErrorCode::format_error (io_error when the file cannot be read) and name the
// file and what was expected.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "init.h"
#include "rlx/status.h"
#include "rlx/tensor.h"

namespace rlx::train {

struct IdxArray {
  Sizes dims;
  std::vector<uint8_t> data;  // row-major, numel(dims) bytes
};

// Reads an unsigned-byte IDX file with `ndim` dims (plain or gzip).
Expected<IdxArray> read_idx(const std::string& path, int ndim);
// Writes an unsigned-byte IDX file; gzip-compressed when `path` ends in ".gz".
Status write_idx(const std::string& path, const Sizes& dims, std::span<const uint8_t> data);

struct Dataset {
  Tensor images;  // f32 [N, rows, cols]: pixel / 255
  Tensor labels;  // i32 [N]
  int64_t size() const { return labels.numel(); }
};

struct MnistData {
  Dataset train, test;
};

// An images file and a labels file made into a dataset (labels must be < classes).
Expected<Dataset> load_idx_dataset(const std::string& images_path, const std::string& labels_path, int classes = 10);
// A folder with train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte, each plain or with ".gz" appended.
Expected<MnistData> load_mnist(const std::string& dir);

// Synthetic 28x28 digits-like data, deterministic in `seed`: each of the 10 classes is a
// fixed pattern of three Gaussian blobs; each example shifts it by up to 2 pixels, scales its
// brightness and adds pixel noise, so classes overlap a little and accuracy has to be learned.
// Pixels are whole bytes (pixel / 255), so writing the set as IDX and reading it back is exact.
MnistData synthetic_mnist(int64_t train_size = 60000, int64_t test_size = 10000, uint64_t seed = 1);
// Writes a dataset as the four IDX files load_mnist reads (plain, or .gz with gzip = true).
Status write_mnist(const std::string& dir, const MnistData& data, bool gzip = false);

// Batches of a dataset in a shuffled order (a new permutation per epoch, from the seed and the
// epoch number). Every example is seen once per epoch; the last batch of an epoch holds the
// remainder (smaller than `batch` when the size is not a multiple). Batches are copied into
// buffers owned by the loader, shaped [b] + example_shape (e.g. {784} or {1, 28, 28}).
class BatchLoader {
 public:
  BatchLoader(const Dataset& data, int64_t batch, Sizes example_shape, uint64_t seed, bool shuffle = true);
  void start_epoch(int64_t epoch);
  int64_t batches_per_epoch() const;
  // The next batch of this epoch; false when the epoch is done. The tensors stay valid until
  // the next call.
  bool next(Tensor& images, Tensor& labels);

 private:
  const Dataset& data_;
  int64_t batch_;
  Sizes example_;
  uint64_t seed_;
  bool shuffle_;
  std::vector<int64_t> order_;
  int64_t pos_ = 0;
  Tensor full_images_, full_labels_, last_images_, last_labels_;
};

}  // namespace rlx::train
