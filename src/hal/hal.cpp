#include "hal.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace rlx::hal {
namespace {

// A stream runtime's recording: the list itself, and with RLX_PROFILE the time each command
// took, summed over replays and printed (slowest first) when the recording ends.
class ListRecording final : public Recording {
 public:
  explicit ListRecording(CommandList list, std::string_view device) : list(std::move(list)), device(device) {}
  ~ListRecording() override {
    if (!profile || ms.empty()) return;
    std::vector<size_t> order(ms.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ms[a] > ms[b]; });
    for (size_t i = 0; i < std::min<size_t>(order.size(), 12); ++i) {
      const Command& c = list.commands[order[i]];
      const std::string& name = c.kind == Command::Kind::dispatch ? c.dispatch.name : c.name;
      std::fprintf(stderr, "%s profile: %-24s %10.3f ms total\n", device.c_str(), name.c_str(), ms[order[i]]);
    }
  }
  CommandList list;
  std::string device;
  bool profile = std::getenv("RLX_PROFILE") != nullptr;
  std::vector<double> ms;
};

}  // namespace

Expected<std::unique_ptr<Recording>> StreamRuntime::record(CommandList list) {
  return std::unique_ptr<Recording>(std::make_unique<ListRecording>(std::move(list), name()));
}

Status StreamRuntime::replay(Recording& rec, std::span<const void* const> inputs, std::span<void* const> outputs) {
  auto& r = static_cast<ListRecording&>(rec);
  if (inputs.size() != r.list.inputs.size() || outputs.size() != r.list.outputs.size())
    return error(ErrorCode::internal, name(), ": replay with ", inputs.size(), " inputs and ", outputs.size(),
                 " outputs of a recording that has ", r.list.inputs.size(), " and ", r.list.outputs.size());
  // Inputs are written before any command runs and outputs read after the last, so an output
  // may share host memory with an input (a donated cache) safely.
  for (size_t i = 0; i < inputs.size(); ++i)
    if (r.list.inputs[i].bytes) RLX_TRY(write(r.list.inputs[i].range, inputs[i], r.list.inputs[i].bytes));
  if (r.profile) r.ms.resize(r.list.commands.size(), 0.0);
  for (size_t i = 0; i < r.list.commands.size(); ++i) {
    const Command& c = r.list.commands[i];
    const auto t0 = std::chrono::steady_clock::now();
    if (c.kind == Command::Kind::call) {
      RLX_TRY(c.call());
    } else {
      if (c.kind == Command::Kind::dispatch && c.dispatch.empty()) continue;
      RLX_TRY(enqueue(c));
    }
    if (r.profile) {
      RLX_TRY(finish());
      r.ms[i] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    if (r.list.outputs[i].bytes) RLX_TRY(read(r.list.outputs[i].range, outputs[i], r.list.outputs[i].bytes));
  // a fault in any kernel surfaces here
  return finish();
}

std::unique_ptr<PointerLaunch> pointer_launch(const Dispatch& d, int block_size) {
  auto l = std::make_unique<PointerLaunch>();
  for (const BufferRange& b : d.buffers) l->pointers.push_back(device_address(b));
  l->scalars.assign(d.scalars.begin(), d.scalars.end());
  for (void*& p : l->pointers) l->args.push_back(&p);
  for (long long& v : l->scalars) l->args.push_back(&v);
  if (d.items > 0) {
    l->block[0] = static_cast<uint32_t>(std::min<int64_t>(block_size, d.items));
    l->grid[0] = static_cast<uint32_t>((d.items + l->block[0] - 1) / l->block[0]);
  } else {
    for (int i = 0; i < 3; ++i) {
      l->grid[i] = d.groups[i];
      l->block[i] = d.local[i];
    }
  }
  return l;
}

Status check_pointer_launch(const Dispatch& d, int block_size, int64_t max_blocks, std::string_view device) {
  if (d.items > 0 && (d.items + block_size - 1) / block_size > max_blocks)
    return error(ErrorCode::unsupported, device, ": kernel ", d.name, " has ", d.items, " work items, more than one launch covers");
  return Status::ok();
}

void grid_2d(int64_t items, int size, int64_t max_x, uint32_t out[3]) {
  const int64_t groups = (items + size - 1) / size;
  max_x = std::max<int64_t>(max_x, 1);
  out[0] = static_cast<uint32_t>(std::min(groups, max_x));
  out[1] = static_cast<uint32_t>((groups + max_x - 1) / max_x);
  out[2] = 1;
}

Status dispatch_groups(const Dispatch& d, int group_size, const uint32_t max_groups[3], std::string_view device,
                       uint32_t out[3]) {
  if (d.items > 0) grid_2d(d.items, group_size, max_groups[0], out);
  else std::copy(d.groups, d.groups + 3, out);
  for (int i = 0; i < 3; ++i)
    if (out[i] > max_groups[i])
      return error(ErrorCode::unsupported, device, ": ", d.name, " needs ", out[0], "x", out[1], "x", out[2],
                   " work groups, more than this device dispatches");
  return Status::ok();
}

}  // namespace rlx::hal
