// Collectives along an axis other than 0 move blocks through a staging buffer: the
// communicator only gathers and scatters whole contiguous blocks in rank order, so
// all_gather(axis) gathers [ranks][outer][len][inner] and interleaves it into
// [outer][ranks * len][inner], and reduce_scatter(axis) does the reverse before reducing.
#include "dist/collective_ops.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace rlx::dist {
namespace {

struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;  // elements before, along and after the axis
};

AxisSplit split_at(const Sizes& s, int axis) {
  AxisSplit a;
  for (int d = 0; d < static_cast<int>(s.size()); ++d) {
    if (d < axis) a.outer *= s[d];
    else if (d == axis) a.len = s[d];
    else a.inner *= s[d];
  }
  return a;
}

Status check_ranks(Communicator& comm, const Attrs& attrs, std::string_view label) {
  const int64_t ranks = attrs.i("ranks", 0);
  if (ranks != comm.size())
    return error(ErrorCode::invalid_argument, label, ": the graph was built for ", ranks,
                 " ranks but runs on a communicator of ", comm.size(), " (", comm.backend(), ")");
  return Status::ok();
}

Status reduce_of(const Attrs& attrs, ReduceOp* op, std::string_view label) {
  const std::string name = attrs.s("reduce", "sum");
  if (!parse_reduce_op(name, op)) return error(ErrorCode::invalid_argument, label, ": unknown reduce '", name, "'");
  return Status::ok();
}

}  // namespace

Communicator& default_communicator() {
  static std::shared_ptr<Communicator> single = single_process_communicator();
  return *single;
}

CommunicatorGroups::CommunicatorGroups(std::vector<std::shared_ptr<Communicator>> groups) : groups_(std::move(groups)) {
  if (groups_.empty() || !groups_.front()) groups_.insert(groups_.begin(), single_process_communicator());
}

Communicator* CommunicatorGroups::group(int64_t i) const {
  return i >= 0 && i < static_cast<int64_t>(groups_.size()) ? groups_[static_cast<size_t>(i)].get() : nullptr;
}

std::string CommunicatorGroups::backend() const {
  std::string s = first().backend();
  for (size_t i = 1; i < groups_.size(); ++i) s += cat("; group ", i, ": ", groups_[i] ? groups_[i]->size() : 0, " ranks");
  return s;
}

Status run_collective(Communicator& group0, Op op, const Attrs& attrs, DType dtype, const Sizes& in_sizes,
                      const void* in, const Sizes& out_sizes, void* out, std::string_view label) {
  Communicator* selected = &group0;
  if (const int64_t gi = attrs.i("group", 0); gi != 0) {
    const auto* groups = dynamic_cast<const CommunicatorGroups*>(&group0);
    selected = groups ? groups->group(gi) : nullptr;
    if (!selected)
      return error(ErrorCode::invalid_argument, label, ": the node runs over communicator group ", gi,
                   " but the graph was compiled with ", groups ? cat(groups->num_groups(), " groups") : "one communicator",
                   " (", group0.backend(), ")");
  }
  Communicator& comm = *selected;
  const int64_t n_in = numel(in_sizes);
  const size_t in_bytes = dtype_bytes(dtype, static_cast<size_t>(n_in));
  const auto with_node = [&](Status s) { return s.is_ok() ? s : s.with_context(label); };
  switch (op) {
    case Op::AllReduce: {
      ReduceOp r;
      RLX_TRY(reduce_of(attrs, &r, label));
      if (in_bytes && in != out) std::memcpy(out, in, in_bytes);
      return with_node(comm.all_reduce(out, n_in, dtype, r));
    }
    case Op::Broadcast: {
      const int64_t root = attrs.i("root", 0);
      if (root >= comm.size())
        return error(ErrorCode::invalid_argument, label, ": root ", root, " is not a rank of a communicator of ",
                     comm.size());
      if (in_bytes && in != out) std::memcpy(out, in, in_bytes);
      return with_node(comm.broadcast(out, n_in, dtype, static_cast<int>(root)));
    }
    case Op::AllGather:
    case Op::ReduceScatter: break;
    default: return error(ErrorCode::internal, label, ": ", op_name(op), " is not a collective");
  }
  RLX_TRY(check_ranks(comm, attrs, label));
  if (dtype_bits(dtype) < 8)
    return error(ErrorCode::unsupported, label, ": ", op_name(op), " of packed ", dtype_name(dtype),
                 " (4-bit elements) along an axis is not supported");
  const int64_t ranks = comm.size();
  const int rank = static_cast<int>(in_sizes.size());
  auto axis = normalize_axis(attrs.i("axis", 0), rank);
  if (!axis) return axis.status().with_context(label);
  const size_t esize = dtype_bytes(dtype, 1);
  if (op == Op::AllGather) {
    const AxisSplit a = split_at(in_sizes, *axis);
    if (a.outer == 1) return with_node(comm.all_gather(in, out, n_in, dtype));  // blocks already in place
    std::vector<uint8_t> staged(in_bytes * static_cast<size_t>(ranks));
    RLX_TRY(with_node(comm.all_gather(in, staged.data(), n_in, dtype)));
    const size_t block = static_cast<size_t>(a.len * a.inner) * esize;
    auto* o = static_cast<uint8_t*>(out);
    for (int64_t r = 0; r < ranks; ++r)
      for (int64_t i = 0; i < a.outer; ++i)
        std::memcpy(o + (static_cast<size_t>(i * ranks + r)) * block,
                    staged.data() + static_cast<size_t>(r) * in_bytes + static_cast<size_t>(i) * block, block);
    return Status::ok();
  }
  ReduceOp r;
  RLX_TRY(reduce_of(attrs, &r, label));
  const int64_t n_out = numel(out_sizes);
  const AxisSplit a = split_at(out_sizes, *axis);  // len: this rank's block along the axis
  if (a.outer == 1) return with_node(comm.reduce_scatter(in, out, n_out, dtype, r));
  // [outer][ranks * len][inner] -> [ranks][outer][len][inner]
  std::vector<uint8_t> staged(in_bytes);
  const size_t block = static_cast<size_t>(a.len * a.inner) * esize;
  const auto* src = static_cast<const uint8_t*>(in);
  const size_t out_bytes = static_cast<size_t>(n_out) * esize;
  for (int64_t rr = 0; rr < ranks; ++rr)
    for (int64_t i = 0; i < a.outer; ++i)
      std::memcpy(staged.data() + static_cast<size_t>(rr) * out_bytes + static_cast<size_t>(i) * block,
                  src + static_cast<size_t>(i * ranks + rr) * block, block);
  return with_node(comm.reduce_scatter(staged.data(), out, n_out, dtype, r));
}

bool overlap_collectives() {
  static const bool on = [] {
    const char* e = std::getenv("RLX_COMM_OVERLAP");
    return !(e && std::string_view(e) == "0");
  }();
  return on;
}

CollectiveQueue::CollectiveQueue() : thread_([this] { loop(); }) {}

CollectiveQueue::~CollectiveQueue() {
  (void)wait_all();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

int64_t CollectiveQueue::submit(const std::function<Status()>* fn) {
  int64_t t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    t = next_++;
    queue_.emplace_back(t, fn);
  }
  cv_.notify_one();
  return t;
}

void CollectiveQueue::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    const auto [t, fn] = queue_.front();
    queue_.pop_front();
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    Status s = (*fn)();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    lock.lock();
    busy_ms_ += ms;
    results_[t] = std::move(s);
    completed_ = t + 1;  // FIFO: every earlier ticket is done too
    done_cv_.notify_all();
  }
}

Status CollectiveQueue::wait(int64_t t) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return completed_ > t; });
  waited_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto it = results_.find(t);
  if (it == results_.end()) return Status::ok();  // waited for already (wait_all)
  Status s = std::move(it->second);
  results_.erase(it);
  return s;
}

Status CollectiveQueue::wait_all() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return completed_ >= next_; });
  waited_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Status first = Status::ok();
  for (auto& [t, s] : results_)
    if (first.is_ok() && !s.is_ok()) first = std::move(s);
  results_.clear();
  return first;
}

bool CollectiveQueue::idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= next_;
}

}  // namespace rlx::dist
