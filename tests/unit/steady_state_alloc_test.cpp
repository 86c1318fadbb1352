// A steady-state run allocates nothing: after the first run, run_into with preallocated
// outputs makes no heap allocation on the CPU device (counted through operator new).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "rlx/compile.h"
#include "rlx/ir_text.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocs{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// Every replaceable form that the library may pair with these deletes goes through malloc
// too (std::stable_sort's temporary buffer uses the nothrow form; ASan checks the pairing).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace rlx {
namespace {

TEST(SteadyState, RunIntoAllocatesNothing) {
  auto g = parse_graph(R"(
graph @g(%x: f32[16, 64]) -> (f32[16, 32], f32[16]) {
  %w = param "w" : f32[64, 32]
  %h = matmul(%x, %w)
  %a = gelu(%h)
  %s = softmax(%a) {axis = -1}
  %m = reduce_max(%s) {axes = [1], keepdims = 0}
  return %s, %m
})");
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  Tensor w = Tensor::zeros(DType::f32, {64, 32});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = 0.01f * static_cast<float>(i % 17);
  g->weights["w"] = w;
  auto m = Model::compile(*g, {.device = "cpu"});
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  std::vector<Tensor> in{Tensor::zeros(DType::f32, {16, 64})};
  for (int64_t i = 0; i < in[0].numel(); ++i) in[0].data<float>()[i] = 0.1f * static_cast<float>(i % 7);
  auto v = (*m)->variant_for(in);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  auto outs = (*v)->executable->run(in);
  ASSERT_TRUE(outs.has_value());
  ASSERT_TRUE((*v)->executable->run_into(in, *outs).is_ok());  // warm: thread pool, packing buffers
  g_allocs = 0;
  g_counting = true;
  Status s = (*v)->executable->run_into(in, *outs);
  s = (*v)->executable->run_into(in, *outs);
  g_counting = false;
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(g_allocs.load(), 0) << "heap allocations in a steady-state run";
  EXPECT_GT((*v)->executable->stats().arena_bytes, 0u);
}

}  // namespace
}  // namespace rlx
