// Where the npm peers of scripts/install-npm.sh live, for tests that use one as an oracle:
// $RLX_NPM_DIR, then <build dir>/npm, then <source>/build/npm. A test whose peer is missing
// calls require_npm_package: in CI (the CI environment variable set) that is a failure, since CI
// installs the peers; elsewhere the test skips, saying what is missing and how to install it.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace rlx::test_peers {

// The folder whose node_modules holds `package` (e.g. "tokenizers", "@huggingface/jinja"),
// under `subdir` of the npm folder ("" or "llama-cpp"); "" with the reason in *why otherwise.
inline std::string find_npm_package(const std::string& package, std::string* why, const std::string& subdir = "") {
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    *why = "node is not installed (scripts/install-deps.sh installs it)";
    return "";
  }
  std::vector<std::string> roots;
  if (const char* e = std::getenv("RLX_NPM_DIR")) roots.push_back(e);
  roots.push_back(std::string(RLX_BINARY_DIR) + "/npm");
  roots.push_back(std::string(RLX_SOURCE_DIR) + "/build/npm");
  struct stat st;
  for (const std::string& r : roots) {
    const std::string d = subdir.empty() ? r : r + "/" + subdir;
    if (::stat((d + "/node_modules/" + package + "/package.json").c_str(), &st) == 0) return d;
  }
  *why = "the npm package " + package + " is not installed (run scripts/install-npm.sh; looked under $RLX_NPM_DIR, " +
         roots[roots.size() - 2] + " and " + roots.back() + ")";
  return "";
}

}  // namespace rlx::test_peers

// Sets `dir` to the npm folder holding `package`, or fails (in CI) / skips (elsewhere) the test.
#define RLX_REQUIRE_NPM_PACKAGE(dir, package, ...)                                        \
  std::string dir;                                                                        \
  {                                                                                       \
    std::string why_missing_;                                                             \
    dir = ::rlx::test_peers::find_npm_package(package, &why_missing_, ##__VA_ARGS__);     \
    if (dir.empty()) {                                                                    \
      if (std::getenv("CI")) FAIL() << why_missing_;                                      \
      GTEST_SKIP() << why_missing_;                                                       \
    }                                                                                     \
  }
