// Source text written once for several languages: RLX_ words in the text are replaced by what
// each language spells there (the tiled GEMM of kernels/gpu_natives.cpp, the f32 math shared by
// the HLSL and MSL preludes). WGSL has no preprocessor, so the replacing is done here rather
// than by macros.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace rlx::codegen {

using Words = std::map<std::string, std::string, std::less<>>;

// `text` with every identifier that is a key of `words` replaced by its value.
std::string expand_words(std::string_view text, const Words& words);

}  // namespace rlx::codegen
