// MNIST IDX files (plain and gzip) written and read back, malformed files refused with
// messages that name the file and the problem, the synthetic set, and shuffled batching.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "train/data.h"

namespace rlx::train {
namespace {

std::string temp_dir(const std::string& name) {
  const std::string d = std::string(RLX_BINARY_DIR) + "/train_data_test/" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

TEST(Idx, PlainAndGzipRoundTrip) {
  const std::string d = temp_dir("roundtrip");
  std::vector<uint8_t> px(3 * 4 * 5);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 7);
  for (const std::string name : {"a-idx3-ubyte", "a-idx3-ubyte.gz"}) {
    ASSERT_TRUE(write_idx(d + "/" + name, {3, 4, 5}, px).is_ok());
    auto r = read_idx(d + "/" + name, 3);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->dims, (Sizes{3, 4, 5}));
    EXPECT_EQ(r->data, px);
  }
  // the plain file is exactly the IDX layout: magic 0 0 8 3, big-endian dims, data
  const auto raw = read_bytes(d + "/a-idx3-ubyte");
  ASSERT_EQ(raw.size(), 16 + px.size());
  EXPECT_EQ((std::vector<uint8_t>(raw.begin(), raw.begin() + 8)), (std::vector<uint8_t>{0, 0, 8, 3, 0, 0, 0, 3}));
  // the gzip file really is compressed (gzip signature)
  const auto gz = read_bytes(d + "/a-idx3-ubyte.gz");
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(gz[0], 0x1f);
  EXPECT_EQ(gz[1], 0x8b);
}

void expect_error(const std::string& path, int ndim, ErrorCode code, const std::string& words) {
  auto r = read_idx(path, ndim);
  ASSERT_FALSE(r.has_value()) << path;
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().to_string();
}

TEST(Idx, MalformedFilesAreRefused) {
  const std::string d = temp_dir("bad");
  write_bytes(d + "/magic", {1, 0, 8, 1, 0, 0, 0, 1, 5});
  expect_error(d + "/magic", 1, ErrorCode::format_error, "not an IDX file");
  write_bytes(d + "/float", {0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0, 0});
  expect_error(d + "/float", 1, ErrorCode::unsupported, "not unsigned byte");
  write_bytes(d + "/ndim", {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 9});
  expect_error(d + "/ndim", 1, ErrorCode::format_error, "expected 1 dimension");
  write_bytes(d + "/short", {0, 0, 8, 1, 0, 0, 0, 4, 1, 2});
  expect_error(d + "/short", 1, ErrorCode::format_error, "the file holds 2");
  write_bytes(d + "/long", {0, 0, 8, 1, 0, 0, 0, 1, 1, 2});
  expect_error(d + "/long", 1, ErrorCode::format_error, "the file holds 2");
  write_bytes(d + "/zero", {0, 0, 8, 1, 0, 0, 0, 0});
  expect_error(d + "/zero", 1, ErrorCode::format_error, "dimension 0 is 0");
  write_bytes(d + "/huge", {0, 0, 8, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
  expect_error(d + "/huge", 3, ErrorCode::format_error, "more than");
  write_bytes(d + "/tiny", {0, 0});
  expect_error(d + "/tiny", 1, ErrorCode::format_error, "too short");
  // gzip: truncated stream, and a valid stream whose body is shorter than its header says
  std::vector<uint8_t> px(100, 3);
  ASSERT_TRUE(write_idx(d + "/ok.gz", {100}, px).is_ok());
  auto gz = read_bytes(d + "/ok.gz");
  write_bytes(d + "/cut.gz", std::vector<uint8_t>(gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2)));
  auto cut = read_idx(d + "/cut.gz", 1);
  ASSERT_FALSE(cut.has_value());
  EXPECT_EQ(cut.status().code(), ErrorCode::format_error) << cut.status().to_string();
  std::vector<uint8_t> garbage = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6};
  write_bytes(d + "/garbage.gz", garbage);
  auto g = read_idx(d + "/garbage.gz", 1);
  ASSERT_FALSE(g.has_value());
  EXPECT_EQ(g.status().code(), ErrorCode::format_error) << g.status().to_string();
  auto missing = read_idx(d + "/nope", 1);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.status().code(), ErrorCode::io_error);
}

TEST(Idx, DatasetChecksLabelsAndCounts) {
  const std::string d = temp_dir("dataset");
  std::vector<uint8_t> px(2 * 2 * 2, 255);
  ASSERT_TRUE(write_idx(d + "/im", {2, 2, 2}, px).is_ok());
  ASSERT_TRUE(write_idx(d + "/lb", {2}, std::vector<uint8_t>{1, 9}).is_ok());
  ASSERT_TRUE(write_idx(d + "/lb3", {3}, std::vector<uint8_t>{1, 2, 3}).is_ok());
  ASSERT_TRUE(write_idx(d + "/lbbad", {2}, std::vector<uint8_t>{1, 10}).is_ok());
  auto ok = load_idx_dataset(d + "/im", d + "/lb");
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
  EXPECT_EQ(ok->images.get_f64(0), 1.0);  // pixel / 255
  EXPECT_EQ(ok->labels.get_f64(1), 9.0);
  auto count = load_idx_dataset(d + "/im", d + "/lb3");
  ASSERT_FALSE(count.has_value());
  EXPECT_NE(count.status().message().find("3 labels"), std::string::npos) << count.status().to_string();
  auto bad = load_idx_dataset(d + "/im", d + "/lbbad");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("label 10"), std::string::npos) << bad.status().to_string();
}

TEST(Mnist, SyntheticIsDeterministicAndSurvivesIdx) {
  MnistData a = synthetic_mnist(300, 50, 3), b = synthetic_mnist(300, 50, 3), c = synthetic_mnist(300, 50, 4);
  EXPECT_EQ(a.train.images.sizes(), (Sizes{300, 28, 28}));
  EXPECT_EQ(a.test.labels.sizes(), (Sizes{50}));
  EXPECT_EQ(a.train.images.to_f64(), b.train.images.to_f64());
  EXPECT_NE(a.train.images.to_f64(), c.train.images.to_f64());
  std::set<int> classes;
  for (double y : a.train.labels.to_f64()) classes.insert(static_cast<int>(y));
  EXPECT_EQ(classes.size(), 10u);
  for (bool gz : {false, true}) {
    const std::string d = temp_dir(gz ? "mnist_gz/sub" : "mnist_plain");  // the writer makes folders
    std::filesystem::remove_all(d);
    ASSERT_TRUE(write_mnist(d, a, gz).is_ok());
    EXPECT_TRUE(std::filesystem::exists(d + (gz ? "/t10k-labels-idx1-ubyte.gz" : "/t10k-labels-idx1-ubyte")));
    auto r = load_mnist(d);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->train.images.to_f64(), a.train.images.to_f64());  // whole bytes: exact
    EXPECT_EQ(r->test.labels.to_f64(), a.test.labels.to_f64());
  }
  auto none = load_mnist(temp_dir("empty"));
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.status().message().find("train-images-idx3-ubyte"), std::string::npos);
}

Dataset numbered(int64_t n) {
  Dataset d;
  d.images = Tensor::zeros(DType::f32, {n, 2, 2});
  d.labels = Tensor::zeros(DType::i32, {n});
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < 4; ++k) d.images.data<float>()[i * 4 + k] = static_cast<float>(i);
    d.labels.data<int32_t>()[i] = static_cast<int32_t>(i % 10);
  }
  return d;
}

std::vector<int64_t> epoch_order(BatchLoader& l, int64_t epoch, std::vector<int64_t>* sizes = nullptr) {
  l.start_epoch(epoch);
  std::vector<int64_t> order;
  Tensor x, y;
  while (l.next(x, y)) {
    if (sizes) sizes->push_back(x.sizes()[0]);
    EXPECT_EQ(x.sizes()[1], 4);  // reshaped to the example shape
    for (int64_t i = 0; i < x.sizes()[0]; ++i) {
      const int64_t id = static_cast<int64_t>(x.data<float>()[i * 4]);
      EXPECT_EQ(y.data<int32_t>()[i], id % 10) << "label travels with its image";
      order.push_back(id);
    }
  }
  return order;
}

TEST(BatchLoader, EveryExampleOncePerEpochWithPartialLastBatch) {
  Dataset d = numbered(103);
  BatchLoader l(d, 25, {4}, 9);
  EXPECT_EQ(l.batches_per_epoch(), 5);
  std::vector<int64_t> sizes;
  auto o1 = epoch_order(l, 1, &sizes);
  EXPECT_EQ(sizes, (std::vector<int64_t>{25, 25, 25, 25, 3}));
  std::vector<int64_t> sorted = o1;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 103; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
  // shuffled, a new order each epoch, the same order for the same seed and epoch
  auto o2 = epoch_order(l, 2);
  EXPECT_NE(o1, o2);
  std::vector<int64_t> identity(103);
  for (int64_t i = 0; i < 103; ++i) identity[static_cast<size_t>(i)] = i;
  EXPECT_NE(o1, identity);
  BatchLoader again(d, 25, {4}, 9), other(d, 25, {4}, 10);
  EXPECT_EQ(epoch_order(again, 1), o1);
  EXPECT_NE(epoch_order(other, 1), o1);
  // without shuffling: in order
  BatchLoader plain(d, 50, {4}, 9, false);
  EXPECT_EQ(epoch_order(plain, 1), identity);
}

TEST(BatchLoader, BatchLargerThanDataset) {
  Dataset d = numbered(7);
  BatchLoader l(d, 32, {2, 2}, 1);
  EXPECT_EQ(l.batches_per_epoch(), 1);
  std::vector<int64_t> sizes;
  l.start_epoch(0);
  Tensor x, y;
  ASSERT_TRUE(l.next(x, y));
  EXPECT_EQ(x.sizes(), (Sizes{7, 2, 2}));
  EXPECT_FALSE(l.next(x, y));
}

}  // namespace
}  // namespace rlx::train
