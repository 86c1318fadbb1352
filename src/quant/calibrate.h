// quant/calibrate.h: static activation scales for the int8 linear layers (`rlx quantize
// --scheme int8 --calib DATA`, docs/quantization.md).
//
// The f32 model runs over sample inputs and, for every Linear, the values reaching it are
// summarized into one per-tensor scale s (x ~= q * s, q in [-127, 127]): min-max takes
// s = max|x| / 127; percentile takes s = P_p(|x|) / 127, the p-th percentile of |x| over all the
// values (a histogram of 8192 bins over [0, max|x|], filled in a second pass; the bin's upper
// edge), which clips the rare outliers so that the bulk of the values keeps more resolution.
// Only real tokens count (padding positions are skipped through the attention mask).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "rlx/status.h"

namespace rlx::quant {

struct CalibrationOptions {
  std::string method = "minmax";  // "minmax" or "percentile"
  double percentile = 99.99;      // for "percentile": in (0, 100]
  int64_t max_length = 128;       // tokens per sample (longer ones are truncated)
  int64_t batch = 16;             // samples per run
};

struct CalibrationResult {
  // "<linear>.weight" -> the static scale of that Linear's input
  std::map<std::string, float> input_scales;
  int64_t samples = 0, tokens = 0;
  std::string description;  // e.g. "percentile 99.99 over 64 sentences (1021 tokens)"
};

// Reads `path`: one sample sentence per line (blank lines skipped). invalid_argument if it holds
// none; io_error naming the file if it cannot be read.
Expected<std::vector<std::string>> read_calibration_sentences(const std::string& path);

// Runs the f32 BERT-family folder `dir` on `sentences` (CPU) and returns the input scale of every
// Linear whose weight is a 2-D "*.weight" outside the embeddings (the layers
// quantize_int8_folder quantizes). invalid_argument for a bad method or percentile.
Expected<CalibrationResult> calibrate_bert(const std::string& dir, const std::vector<std::string>& sentences,
                                           const CalibrationOptions& options);

// The name of the static input scale tensor of a Linear "<name>.weight": "<name>.input_scale".
std::string input_scale_name(const std::string& weight_name);

}  // namespace rlx::quant
