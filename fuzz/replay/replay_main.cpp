// A main for the fuzz targets that needs no libFuzzer (so GCC builds it, with or without
// sanitizers): runs LLVMFuzzerTestOneInput on every file of a seed corpus, then on seeded
// mutations of them for a bounded time. It is not coverage guided, so it finds less than
// scripts/fuzz.sh does with clang; its point is that every CI run, the sanitized one included,
// pushes thousands of damaged files through each loader.
//
// Usage: rlx_fuzz_replay_<name> CORPUS_DIR [--seconds S] [--seed N] [--only ITERATION]
// Exits 2 if the corpus folder is missing or empty. A crash or sanitizer report in the target
// ends the process as it would under libFuzzer, after printing the seed and iteration that
// `--seed N --only ITERATION` replays (each iteration derives its own generator).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

volatile long long g_iteration = -1;  // the input being run, for the crash message

// Async-signal-safe: formats with no allocation and writes with write(2).
void say_where() {
  char buf[96];
  const char head[] = "\nfuzz replay: died in iteration ";
  size_t n = 0;
  for (char c : head) if (c) buf[n++] = c;
  long long it = g_iteration;
  if (it < 0) { buf[n++] = '-'; buf[n++] = '1'; }
  else {
    char d[24]; int k = 0;
    do { d[k++] = static_cast<char>('0' + it % 10); it /= 10; } while (it);
    while (k) buf[n++] = d[--k];
  }
  const char tail[] = " (replay it with --seed <seed printed above> --only <iteration>)\n";
  for (char c : tail) if (c && n < sizeof buf - 1) buf[n++] = c;
  if (::write(2, buf, n) < 0) {}
}

void on_fatal_signal(int sig) {
  say_where();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

// Sanitizers call this before they exit (declared weak: absent in plain builds).
extern "C" void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));

namespace {

Bytes read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Values that sit on the edges loaders check: sizes, counts, signs, offsets.
constexpr uint64_t kInteresting[] = {0, 1, 2, 7, 8, 31, 32, 127, 128, 255, 256, 4095, 4096,
                                     0x7fff, 0x8000, 0xffff, 0x10000, 0x7fffffff, 0x80000000u,
                                     0xffffffffu, 0x100000000ull, 0x7fffffffffffffffull,
                                     0x8000000000000000ull, 0xffffffffffffffffull};

// One random edit of `b` (never grows it past 1 MiB). `other` is a second corpus file for splices.
void mutate_once(Bytes& b, const Bytes& other, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  switch (rng() % 8) {
    case 0:  // flip one bit
      if (!b.empty()) b[pick(b.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
      break;
    case 1:  // random byte
      if (!b.empty()) b[pick(b.size())] = static_cast<uint8_t>(rng());
      break;
    case 2: {  // an interesting little-endian integer of width 1, 2, 4 or 8
      const size_t w = size_t{1} << (rng() % 4);
      if (b.size() < w) break;
      const uint64_t v = kInteresting[pick(std::size(kInteresting))];
      const size_t at = pick(b.size() - w + 1);
      for (size_t i = 0; i < w; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
      break;
    }
    case 3:  // truncate
      b.resize(pick(b.size() + 1));
      break;
    case 4: {  // erase a range
      if (b.empty()) break;
      const size_t at = pick(b.size()), n = 1 + pick(std::min<size_t>(64, b.size() - at));
      b.erase(b.begin() + static_cast<ptrdiff_t>(at), b.begin() + static_cast<ptrdiff_t>(at + n));
      break;
    }
    case 5: {  // duplicate a range in place
      if (b.empty() || b.size() > (1u << 20)) break;
      const size_t at = pick(b.size()), n = 1 + pick(std::min<size_t>(64, b.size() - at));
      Bytes chunk(b.begin() + static_cast<ptrdiff_t>(at), b.begin() + static_cast<ptrdiff_t>(at + n));
      b.insert(b.begin() + static_cast<ptrdiff_t>(pick(b.size() + 1)), chunk.begin(), chunk.end());
      break;
    }
    case 6: {  // splice: this file's head, the other's tail
      if (other.empty()) break;
      const size_t cut = pick(b.size() + 1), from = pick(other.size());
      b.resize(cut);
      b.insert(b.end(), other.begin() + static_cast<ptrdiff_t>(from), other.end());
      if (b.size() > (1u << 20)) b.resize(1u << 20);
      break;
    }
    default:  // add or subtract a small number from a byte (lengths off by a few)
      if (!b.empty()) b[pick(b.size())] += static_cast<uint8_t>(static_cast<int>(rng() % 33) - 16);
      break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [--seconds S] [--seed N] [--only ITERATION]\n", argv[0]);
    return 2;
  }
  double seconds = 10;
  uint64_t seed = 1;
  long long only = -1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (k == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (k == "--only") only = std::atoll(argv[i + 1]);
    else { std::fprintf(stderr, "unknown option %s\n", k.c_str()); return 2; }
  }
  std::vector<Bytes> corpus;
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(argv[1], ec)) {
    if (!e.is_regular_file()) continue;
    names.push_back(e.path().filename().string());
  }
  if (ec || names.empty()) {
    std::fprintf(stderr, "fuzz replay: no seed files in %s\n", argv[1]);
    return 2;
  }
  std::sort(names.begin(), names.end());  // the same order everywhere, so --seed replays
  for (const std::string& n : names) corpus.push_back(read_file(std::filesystem::path(argv[1]) / n));

  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(say_where);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, on_fatal_signal);
  for (const Bytes& b : corpus) LLVMFuzzerTestOneInput(b.data(), b.size());
  std::printf("fuzz replay: %zu seed files ran; mutating with seed %llu for %.0f s\n", corpus.size(),
              static_cast<unsigned long long>(seed), seconds);
  std::fflush(stdout);

  const auto start = std::chrono::steady_clock::now();
  long long it = 0;
  for (;; ++it) {
    if (only < 0 && (it & 63) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds)
      break;
    // every iteration derives its own generator, so one iteration can be replayed alone
    std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(it));
    const size_t base = rng() % corpus.size();
    if (only >= 0 && it != only) continue;
    g_iteration = it;
    Bytes b = corpus[base];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) mutate_once(b, corpus[rng() % corpus.size()], rng);
    if (only >= 0) std::printf("iteration %lld: %s with %d edits, %zu bytes\n", it, names[base].c_str(), edits, b.size());
    LLVMFuzzerTestOneInput(b.data(), b.size());
    if (only >= 0) break;
  }
  std::printf("fuzz replay: %lld mutated inputs, no crash\n", it);
  return 0;
}
