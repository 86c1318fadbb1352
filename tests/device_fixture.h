// One test body for every registered device (candle's one-body-many-devices tests, ggml's
// test-backend-ops): a suite derives from DeviceTest and is instantiated with
// RLX_INSTANTIATE_FOR_DEVICES(Suite), so no test writes a list of device names; a body starts
// with RLX_REQUIRE_DEVICE_KIND(kind), and a device of another kind, or one not available here,
// skips with the reason (the device's own, for an unavailable one).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rlx/device.h"

namespace rlx::device_tests {

// The registered devices of `kind`, available or not (in the registry's order).
inline std::vector<std::string> devices_of_kind(DeviceKind kind) {
  std::vector<std::string> r;
  for (const DeviceInfo& d : list_devices())
    if (d.kind == kind) r.push_back(d.name);
  return r;
}

// Why `device` cannot run a test for devices of `kind`; empty when it can.
inline std::string why_not(const std::string& device, DeviceKind kind) {
  for (const DeviceInfo& d : list_devices()) {
    if (d.name != device) continue;
    if (d.kind != kind)
      return device + " is a " + std::string(device_kind_name(d.kind)) + " device; this test is for " +
             std::string(device_kind_name(kind)) + " devices";
    return d.available ? "" : device + " is not available: " + d.reason;
  }
  return "no device " + device + " is registered";
}

class DeviceTest : public ::testing::TestWithParam<std::string> {
 protected:
  const std::string& device() const { return GetParam(); }
};

}  // namespace rlx::device_tests

#define RLX_INSTANTIATE_FOR_DEVICES(Suite)                                                         \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite, ::testing::ValuesIn(::rlx::device_names()),             \
                           [](const ::testing::TestParamInfo<std::string>& i) { return i.param; })

#define RLX_REQUIRE_DEVICE_KIND(kind)                                                  \
  if (std::string why_ = ::rlx::device_tests::why_not(GetParam(), kind); !why_.empty()) \
  GTEST_SKIP() << why_
