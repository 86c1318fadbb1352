#include "data.h"

#include <dlfcn.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "rlx/mapped_file.h"
#include "rlx/checked.h"
#include "rlx/thread_pool.h"

namespace rlx::train {
namespace {

constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 31;

// zlib, loaded at run time: rlx_core does not link it, and only gzip files need it.
struct Zlib {
  int (*inflate_init)(z_streamp, int, const char*, int) = nullptr;
  int (*inflate_fn)(z_streamp, int) = nullptr;
  int (*inflate_end)(z_streamp) = nullptr;
  int (*deflate_init)(z_streamp, int, int, int, int, int, const char*, int) = nullptr;
  int (*deflate_fn)(z_streamp, int) = nullptr;
  int (*deflate_end)(z_streamp) = nullptr;
  const char* (*version)() = nullptr;
  std::string error;
};

const Zlib& zlib() {
  static Zlib z;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libz.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      z.error = cat("zlib (libz.so.1) could not be loaded: ", dlerror());
      return;
    }
    auto sym = [&](const char* name) { return dlsym(h, name); };
    z.inflate_init = reinterpret_cast<decltype(z.inflate_init)>(sym("inflateInit2_"));
    z.inflate_fn = reinterpret_cast<decltype(z.inflate_fn)>(sym("inflate"));
    z.inflate_end = reinterpret_cast<decltype(z.inflate_end)>(sym("inflateEnd"));
    z.deflate_init = reinterpret_cast<decltype(z.deflate_init)>(sym("deflateInit2_"));
    z.deflate_fn = reinterpret_cast<decltype(z.deflate_fn)>(sym("deflate"));
    z.deflate_end = reinterpret_cast<decltype(z.deflate_end)>(sym("deflateEnd"));
    z.version = reinterpret_cast<decltype(z.version)>(sym("zlibVersion"));
    if (!z.inflate_init || !z.inflate_fn || !z.inflate_end || !z.deflate_init || !z.deflate_fn || !z.deflate_end ||
        !z.version)
      z.error = "the zlib that was loaded lacks inflate/deflate";
  });
  return z;
}

Expected<std::vector<uint8_t>> read_file(const std::string& path) {
  RLX_TRY(require_regular_file(path));
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return error(ErrorCode::io_error, path, ": cannot open: ", std::strerror(errno));
  const std::streamoff n = f.tellg();
  if (n < 0) return error(ErrorCode::io_error, path, ": cannot read its size");
  if (static_cast<uint64_t>(n) > kMaxIdxBytes)
    return error(ErrorCode::format_error, path, ": ", n, " bytes is larger than the ", kMaxIdxBytes, "-byte limit");
  std::vector<uint8_t> b(static_cast<size_t>(n));
  f.seekg(0);
  if (n > 0 && !f.read(reinterpret_cast<char*>(b.data()), n)) return error(ErrorCode::io_error, path, ": read failed");
  return b;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Pulls decompressed bytes on demand, so the header is validated before the body is
// allocated (the size a corrupt header claims is never trusted).
class Inflater {
 public:
  Inflater(const std::string& path, std::vector<uint8_t>& in) : path_(path) {
    std::memset(&s_, 0, sizeof s_);
    s_.next_in = in.data();
    s_.avail_in = static_cast<uInt>(in.size());
  }
  ~Inflater() {
    if (open_) zlib().inflate_end(&s_);
  }
  Status init() {
    const Zlib& z = zlib();
    if (!z.error.empty()) return error(ErrorCode::unavailable, path_, ": gzip file, but ", z.error);
    if (z.inflate_init(&s_, 15 + 16, z.version(), static_cast<int>(sizeof(z_stream))) != Z_OK)
      return error(ErrorCode::runtime_error, path_, ": zlib inflateInit2 failed");
    open_ = true;
    return Status::ok();
  }
  // Fills exactly n bytes at out; error if the stream ends first or is corrupt.
  Status read(uint8_t* out, size_t n, const char* what) {
    s_.next_out = out;
    s_.avail_out = static_cast<uInt>(n);
    while (s_.avail_out > 0) {
      if (ended_)
        return error(ErrorCode::format_error, path_, ": the compressed data ends inside the ", what, " (",
                     n - s_.avail_out, " of ", n, " bytes)");
      int r = zlib().inflate_fn(&s_, Z_NO_FLUSH);
      if (r == Z_STREAM_END) {
        ended_ = true;
      } else if (r != Z_OK) {
        return error(ErrorCode::format_error, path_, ": corrupt gzip data in the ", what, " (zlib: ",
                     s_.msg ? s_.msg : "error", ")");
      }
    }
    return Status::ok();
  }
  // After the last expected byte: the stream must end there, with nothing after it.
  Status finish() {
    uint8_t extra;
    s_.next_out = &extra;
    s_.avail_out = 1;
    while (!ended_) {
      int r = zlib().inflate_fn(&s_, Z_NO_FLUSH);
      if (s_.avail_out == 0)
        return error(ErrorCode::format_error, path_, ": more data than the IDX header declares");
      if (r == Z_STREAM_END) break;
      if (r != Z_OK)
        return error(ErrorCode::format_error, path_, ": corrupt gzip data after the IDX body (zlib: ",
                     s_.msg ? s_.msg : "error", ")");
    }
    if (s_.avail_in != 0) return error(ErrorCode::format_error, path_, ": trailing bytes after the gzip stream");
    return Status::ok();
  }

 private:
  std::string path_;
  z_stream s_;
  bool open_ = false, ended_ = false;
};

Status check_header(const std::string& path, const uint8_t* h, int ndim) {
  if (h[0] != 0 || h[1] != 0)
    return error(ErrorCode::format_error, path, ": not an IDX file (the first two bytes must be 0, got 0x",
                 std::hex, int{h[0]}, " 0x", int{h[1]}, ")");
  if (h[2] != 0x08)
    return error(h[2] == 0x09 || h[2] == 0x0B || h[2] == 0x0C || h[2] == 0x0D || h[2] == 0x0E ? ErrorCode::unsupported
                                                                                           : ErrorCode::format_error,
                 path, ": IDX element type 0x", std::hex, int{h[2]},
                 " is not unsigned byte (0x08), the only type MNIST files use");
  if (h[3] != ndim)
    return error(ErrorCode::format_error, path, ": expected ", ndim, " dimension", ndim == 1 ? "" : "s", " (",
                 ndim == 1 ? "labels" : "images", "), the header says ", int{h[3]});
  return Status::ok();
}

Expected<Sizes> parse_dims(const std::string& path, const uint8_t* p, int ndim, uint64_t& count) {
  Sizes dims;
  count = 1;
  for (int i = 0; i < ndim; ++i) {
    const uint32_t d = be32(p + 4 * i);
    if (d == 0) return error(ErrorCode::format_error, path, ": dimension ", i, " is 0");
    auto m = checked_mul(count, d);
    if (!m || *m > kMaxIdxBytes)
      return error(ErrorCode::format_error, path, ": the dimensions ask for more than ", kMaxIdxBytes, " bytes");
    count = *m;
    dims.push_back(d);
  }
  return dims;
}

Status write_file(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return error(ErrorCode::io_error, path, ": cannot create: ", std::strerror(errno));
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) return error(ErrorCode::io_error, path, ": write failed");
  return Status::ok();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool exists(const std::string& p) { return std::ifstream(p).good(); }

}  // namespace

Expected<IdxArray> read_idx(const std::string& path, int ndim) {
  RLX_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, read_file(path));
  IdxArray a;
  const size_t header = 4 + 4 * static_cast<size_t>(ndim);
  uint64_t count = 0;
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) {
    Inflater z(path, bytes);
    RLX_TRY(z.init());
    uint8_t h[4 + 4 * 4];
    RLX_TRY(z.read(h, 4, "IDX header"));
    RLX_TRY(check_header(path, h, ndim));
    RLX_TRY(z.read(h + 4, header - 4, "IDX header"));
    RLX_ASSIGN_OR_RETURN(a.dims, parse_dims(path, h + 4, ndim, count));
    a.data.resize(static_cast<size_t>(count));
    RLX_TRY(z.read(a.data.data(), a.data.size(), "IDX body"));
    RLX_TRY(z.finish());
    return a;
  }
  if (bytes.size() < 4) return error(ErrorCode::format_error, path, ": ", bytes.size(), " bytes is too short for an IDX header");
  RLX_TRY(check_header(path, bytes.data(), ndim));
  if (bytes.size() < header)
    return error(ErrorCode::format_error, path, ": ", bytes.size(), " bytes is too short for a ", ndim, "-dimension IDX header");
  RLX_ASSIGN_OR_RETURN(a.dims, parse_dims(path, bytes.data() + 4, ndim, count));
  if (bytes.size() - header != count)
    return error(ErrorCode::format_error, path, ": the header declares ", sizes_to_string(a.dims), " = ", count,
                 " bytes of data, the file holds ", bytes.size() - header);
  a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return a;
}

Status write_idx(const std::string& path, const Sizes& dims, std::span<const uint8_t> data) {
  if (dims.empty() || dims.size() > 255) return error(ErrorCode::invalid_argument, "IDX needs 1 to 255 dimensions");
  if (static_cast<uint64_t>(numel(dims)) != data.size())
    return error(ErrorCode::invalid_argument, "IDX dims ", sizes_to_string(dims), " do not match ", data.size(), " bytes");
  std::vector<uint8_t> raw = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (int64_t d : dims) {
    if (d <= 0 || d > UINT32_MAX) return error(ErrorCode::invalid_argument, "IDX dimension ", d, " out of range");
    for (int s = 24; s >= 0; s -= 8) raw.push_back(static_cast<uint8_t>((static_cast<uint64_t>(d) >> s) & 0xff));
  }
  raw.insert(raw.end(), data.begin(), data.end());
  if (!ends_with(path, ".gz")) return write_file(path, raw);
  const Zlib& z = zlib();
  if (!z.error.empty()) return error(ErrorCode::unavailable, path, ": ", z.error);
  z_stream s;
  std::memset(&s, 0, sizeof s);
  if (z.deflate_init(&s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, z.version(), static_cast<int>(sizeof s)) != Z_OK)
    return error(ErrorCode::runtime_error, path, ": zlib deflateInit2 failed");
  std::vector<uint8_t> out(raw.size() + raw.size() / 100 + 1024);
  s.next_in = raw.data();
  s.avail_in = static_cast<uInt>(raw.size());
  s.next_out = out.data();
  s.avail_out = static_cast<uInt>(out.size());
  const int r = z.deflate_fn(&s, Z_FINISH);
  const size_t n = out.size() - s.avail_out;
  z.deflate_end(&s);
  if (r != Z_STREAM_END) return error(ErrorCode::runtime_error, path, ": zlib deflate failed");
  out.resize(n);
  return write_file(path, out);
}

Expected<Dataset> load_idx_dataset(const std::string& images_path, const std::string& labels_path, int classes) {
  RLX_ASSIGN_OR_RETURN(IdxArray im, read_idx(images_path, 3));
  RLX_ASSIGN_OR_RETURN(IdxArray lb, read_idx(labels_path, 1));
  if (im.dims[0] != lb.dims[0])
    return error(ErrorCode::format_error, images_path, " holds ", im.dims[0], " images but ", labels_path, " holds ",
                 lb.dims[0], " labels");
  Dataset d;
  d.images = Tensor::zeros(DType::f32, im.dims);
  float* px = d.images.data<float>();
  for (size_t i = 0; i < im.data.size(); ++i) px[i] = static_cast<float>(im.data[i]) / 255.0f;  // correctly rounded: the same as synthetic_mnist
  d.labels = Tensor::zeros(DType::i32, {lb.dims[0]});
  int32_t* y = d.labels.data<int32_t>();
  for (size_t i = 0; i < lb.data.size(); ++i) {
    if (lb.data[i] >= classes)
      return error(ErrorCode::format_error, labels_path, ": label ", int{lb.data[i]}, " at index ", i,
                   " is not a class in [0, ", classes, ")");
    y[i] = lb.data[i];
  }
  return d;
}

Expected<MnistData> load_mnist(const std::string& dir) {
  auto find = [&](const std::string& name) -> Expected<std::string> {
    const std::string p = dir + "/" + name;
    if (exists(p)) return p;
    if (exists(p + ".gz")) return p + ".gz";
    return error(ErrorCode::io_error, dir, ": neither ", name, " nor ", name, ".gz exists (expected the four MNIST IDX files)");
  };
  RLX_ASSIGN_OR_RETURN(std::string tri, find("train-images-idx3-ubyte"));
  RLX_ASSIGN_OR_RETURN(std::string trl, find("train-labels-idx1-ubyte"));
  RLX_ASSIGN_OR_RETURN(std::string tei, find("t10k-images-idx3-ubyte"));
  RLX_ASSIGN_OR_RETURN(std::string tel, find("t10k-labels-idx1-ubyte"));
  MnistData m;
  RLX_ASSIGN_OR_RETURN(m.train, load_idx_dataset(tri, trl));
  RLX_ASSIGN_OR_RETURN(m.test, load_idx_dataset(tei, tel));
  if (m.train.images.sizes()[1] != m.test.images.sizes()[1] || m.train.images.sizes()[2] != m.test.images.sizes()[2])
    return error(ErrorCode::format_error, dir, ": training images are ", sizes_to_string(m.train.images.sizes()),
                 ", test images ", sizes_to_string(m.test.images.sizes()), " (sizes differ)");
  return m;
}

namespace {

struct Blob {
  double y, x, sigma, weight;
};

Dataset synthetic_split(int64_t n, uint64_t seed, const std::vector<std::vector<Blob>>& protos) {
  constexpr int kSide = 28;
  Dataset d;
  d.images = Tensor::zeros(DType::f32, {n, kSide, kSide});
  d.labels = Tensor::zeros(DType::i32, {n});
  float* px = d.images.data<float>();
  int32_t* y = d.labels.data<int32_t>();
  Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    const int cls = static_cast<int>(rng.below(10));
    y[i] = cls;
    const double dy = static_cast<double>(rng.below(5)) - 2.0, dx = static_cast<double>(rng.below(5)) - 2.0;
    const double bright = 0.6 + 0.4 * rng.uniform();
    // a fourth, random blob from another class's pattern makes the classes overlap
    const auto& other = protos[rng.below(10)];
    const Blob distractor = other[rng.below(other.size())];
    float* img = px + i * kSide * kSide;
    for (int r = 0; r < kSide; ++r)
      for (int c = 0; c < kSide; ++c) {
        double v = 0.0;
        for (const Blob& b : protos[cls]) {
          const double ry = r - (b.y + dy), rx = c - (b.x + dx);
          v += b.weight * std::exp(-(ry * ry + rx * rx) / (2.0 * b.sigma * b.sigma));
        }
        const double ry = r - distractor.y, rx = c - distractor.x;
        v += 0.45 * std::exp(-(ry * ry + rx * rx) / (2.0 * distractor.sigma * distractor.sigma));
        v = v * bright + 0.25 * (rng.uniform() - 0.5);
        const double q = std::round(std::min(1.0, std::max(0.0, v)) * 255.0);
        img[r * kSide + c] = static_cast<float>(q / 255.0);
      }
  }
  return d;
}

}  // namespace

MnistData synthetic_mnist(int64_t train_size, int64_t test_size, uint64_t seed) {
  // class patterns: fixed, independent of the seed (the seed draws the examples)
  std::vector<std::vector<Blob>> protos(10);
  Rng prng(0x5eed0f1a55e5ULL);
  for (auto& p : protos)
    for (int b = 0; b < 3; ++b)
      p.push_back(Blob{6.0 + 16.0 * prng.uniform(), 6.0 + 16.0 * prng.uniform(), 1.8 + 1.7 * prng.uniform(),
                       0.6 + 0.4 * prng.uniform()});
  MnistData m;
  m.train = synthetic_split(train_size, seed * 2 + 1, protos);
  m.test = synthetic_split(test_size, seed * 2 + 2, protos);
  return m;
}

Status write_mnist(const std::string& dir, const MnistData& m, bool gzip) {
  const std::string ext = gzip ? ".gz" : "";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return error(ErrorCode::io_error, dir, ": cannot create the folder: ", ec.message());
  auto write_set = [&](const Dataset& d, const std::string& prefix) -> Status {
    const Sizes& s = d.images.sizes();
    std::vector<uint8_t> px(static_cast<size_t>(d.images.numel()));
    const float* f = d.images.data<float>();
    for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(std::lround(std::min(1.0f, std::max(0.0f, f[i])) * 255.0f));
    std::vector<uint8_t> lb(static_cast<size_t>(d.labels.numel()));
    for (size_t i = 0; i < lb.size(); ++i) lb[i] = static_cast<uint8_t>(d.labels.data<int32_t>()[i]);
    RLX_TRY(write_idx(dir + "/" + prefix + "-images-idx3-ubyte" + ext, s, px));
    return write_idx(dir + "/" + prefix + "-labels-idx1-ubyte" + ext, {static_cast<int64_t>(lb.size())}, lb);
  };
  RLX_TRY(write_set(m.train, "train"));
  return write_set(m.test, "t10k");
}

BatchLoader::BatchLoader(const Dataset& data, int64_t batch, Sizes example_shape, uint64_t seed, bool shuffle)
    : data_(data), batch_(std::max<int64_t>(1, batch)), example_(std::move(example_shape)), seed_(seed), shuffle_(shuffle) {
  const int64_t n = data_.size();
  auto shape = [&](int64_t b) {
    Sizes s{b};
    s.insert(s.end(), example_.begin(), example_.end());
    return s;
  };
  const int64_t full = std::min(batch_, std::max<int64_t>(1, n));
  full_images_ = Tensor::zeros(DType::f32, shape(full));
  full_labels_ = Tensor::zeros(DType::i32, {full});
  const int64_t rem = n % batch_;
  if (rem != 0 && n > batch_) {
    last_images_ = Tensor::zeros(DType::f32, shape(rem));
    last_labels_ = Tensor::zeros(DType::i32, {rem});
  }
  order_.resize(static_cast<size_t>(n));
  start_epoch(0);
}

void BatchLoader::start_epoch(int64_t epoch) {
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int64_t>(i);
  if (shuffle_) {
    Rng rng(seed_ * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(epoch) + 1);
    for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng.below(i)]);
  }
  pos_ = 0;
}

int64_t BatchLoader::batches_per_epoch() const { return (data_.size() + batch_ - 1) / batch_; }

bool BatchLoader::next(Tensor& images, Tensor& labels) {
  const int64_t n = data_.size();
  if (pos_ >= n) return false;
  const int64_t b = std::min(batch_, n - pos_);
  Tensor& im = b == full_labels_.numel() ? full_images_ : last_images_;
  Tensor& lb = b == full_labels_.numel() ? full_labels_ : last_labels_;
  const int64_t example = numel(example_);
  const float* src = data_.images.data<float>();
  const int32_t* ysrc = data_.labels.data<int32_t>();
  float* dst = im.data<float>();
  int32_t* ydst = lb.data<int32_t>();
  // The copy is bound by memory bandwidth and, at large batches, is a tenth of a training
  // step's time: it runs on the pool the step uses, so that no core idles while it runs.
  const int64_t* order = order_.data() + pos_;
  ThreadPool::global().parallel_for(b, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, example)),
                                    [&](int64_t i0, int64_t i1) {
                                      for (int64_t i = i0; i < i1; ++i) {
                                        const int64_t j = order[i];
                                        std::memcpy(dst + i * example, src + j * example,
                                                    static_cast<size_t>(example) * sizeof(float));
                                        ydst[i] = ysrc[j];
                                      }
                                    });
  pos_ += b;
  images = im;
  labels = lb;
  return true;
}

}  // namespace rlx::train
