// ONNX string tensors, computed at import. rlx has no string dtype (no device computes on
// strings), so a string tensor is a value the importer holds: a graph input given with its
// value (rlx run, onnx::load_and_run) or a Cast of a constant. The ops that read or make strings
// run here, on the host: Cast and CastLike to and from strings, and StringNormalizer; a string
// output is returned by load_and_run with the compiled graph's outputs. Anything else that
// reads a string tensor is refused, naming it.
#include <charconv>
#include <cmath>
#include <cstring>

#include <unicode/locid.h>
#include <unicode/unistr.h>

#include "onnx_internal.h"

namespace rlx::onnx_import {
namespace {

// A number as NumPy prints it and ONNX's node tests expect: the shortest text that reads back
// to the same value ("0.039187793" for that f32, "1e-05", "nan", "inf"). ONNX Runtime prints
// 8 significant digits, which differs for some values (1e-5 as "9.9999997e-06").
Expected<std::string> format_number(Importer& m, const Tensor& t, int64_t i) {
  char buf[64];
  std::to_chars_result r{};
  const DType dt = t.dtype();
  if (dt == DType::f32) {
    r = std::to_chars(buf, buf + sizeof buf, t.data<float>()[i]);
  } else if (dt == DType::f64) {
    r = std::to_chars(buf, buf + sizeof buf, t.data<double>()[i]);
  } else if (dt == DType::i64) {
    r = std::to_chars(buf, buf + sizeof buf, t.data<int64_t>()[i]);
  } else if (dt == DType::u64) {
    r = std::to_chars(buf, buf + sizeof buf, t.data<uint64_t>()[i]);
  } else if (is_int(dt) && !is_packed(dt)) {  // 32 bits and narrower: exact through f64
    r = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(t.get_f64(i)));
  } else {
    return m.fail(ErrorCode::unsupported, "cast of ", dtype_name(dt), " to string (rlx formats f32, f64 and integers)");
  }
  std::string s(buf, r.ptr);
  if (s == "-nan") s = "nan";
  return s;
}

// A string read as `to`, as ONNX's Cast reads it: a decimal or scientific number, "inf",
// "-INF", "NaN" (any case) for floats; an error naming the node and the text otherwise.
Expected<double> parse_number(Importer& m, const std::string& text, DType to) {
  std::string s = text;
  if (!s.empty() && s[0] == '+') s.erase(0, 1);
  const char* b = s.data();
  const char* e = b + s.size();
  if (is_float(to)) {
    std::string lower = s;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "inf" || lower == "infinity") return INFINITY;
    if (lower == "-inf" || lower == "-infinity") return -INFINITY;
    if (lower == "nan" || lower == "-nan") return NAN;
    double v = 0;
    auto r = std::from_chars(b, e, v);
    if (r.ec == std::errc() && r.ptr == e) return v;
    if (r.ec == std::errc::result_out_of_range) return std::strtod(s.c_str(), nullptr);  // overflows to inf, underflows to 0
  } else if (is_int(to) && !is_packed(to)) {
    int64_t v = 0;
    auto r = std::from_chars(b, e, v);
    if (r.ec == std::errc() && r.ptr == e) return static_cast<double>(v);
  }
  return m.fail(ErrorCode::invalid_argument, "the string '", text.substr(0, 64), "' is not a ", dtype_name(to));
}

Status map_string_normalizer(Importer& m) {
  RLX_ASSIGN_OR_RETURN(auto in, m.strings_in(0));
  const std::string action = m.as("case_change_action", "NONE");
  const bool case_sensitive = m.ai("is_case_sensitive", 0) != 0;
  std::string locale = m.as("locale", "en_US");
  std::vector<std::string> stopwords;
  if (const ::onnx::AttributeProto* a = m.attr("stopwords")) {
    if (a->type() != ::onnx::AttributeProto::STRINGS)
      return m.fail(ErrorCode::format_error, "attribute 'stopwords' must be a list of strings (STRINGS)");
    stopwords.assign(a->strings().begin(), a->strings().end());
  }
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    return m.fail(ErrorCode::invalid_argument, "case_change_action '", action, "' (NONE, LOWER or UPPER)");
  const Sizes& s = in->sizes;
  if (!(s.size() == 1 || (s.size() == 2 && s[0] == 1)))
    return m.fail(ErrorCode::shape_error, "the input must be [C] or [1, C], got ", sizes_to_string(s));
  const icu::Locale loc(locale.empty() ? "en_US" : locale.c_str());
  if (loc.isBogus()) return m.fail(ErrorCode::invalid_argument, "locale '", locale, "'");
  auto change = [&](const std::string& x, bool upper) {
    icu::UnicodeString u = icu::UnicodeString::fromUTF8(x);
    if (upper) u.toUpper(loc);
    else u.toLower(loc);
    std::string out;
    u.toUTF8String(out);
    return out;
  };
  // stopwords compared as written, or both lowered when the comparison ignores case
  std::vector<std::string> stops;
  for (const std::string& w : stopwords) stops.push_back(case_sensitive ? w : change(w, false));
  StringTensor out;
  for (const std::string& x : in->values) {
    const std::string key = case_sensitive ? x : change(x, false);
    if (std::find(stops.begin(), stops.end(), key) != stops.end()) continue;
    out.values.push_back(action == "NONE" ? x : change(x, action == "UPPER"));
  }
  // everything filtered: one empty string, as ONNX Runtime gives
  if (out.values.empty()) out.values.push_back("");
  const int64_t n = static_cast<int64_t>(out.values.size());
  out.sizes = s.size() == 1 ? Sizes{n} : Sizes{1, n};
  return m.out_strings(0, std::move(out));
}

}  // namespace

Status map_cast_strings(Importer& m, bool to_string, DType to) {
  if (!to_string) {  // strings to numbers
    RLX_ASSIGN_OR_RETURN(auto in, m.strings_in(0));
    Tensor t = Tensor::zeros(to, in->sizes);
    for (size_t i = 0; i < in->values.size(); ++i) {
      RLX_ASSIGN_OR_RETURN(double v, parse_number(m, in->values[i], to));
      t.set_f64(static_cast<int64_t>(i), v);
    }
    return m.out_const(0, std::move(t));
  }
  if (m.is_strings(0)) {  // strings to strings
    RLX_ASSIGN_OR_RETURN(auto in, m.strings_in(0));
    return m.out_strings(0, *in);
  }
  if (!m.is_konst(0)) {
    (void)m.konst(0);  // records the graph inputs it depends on, for the import that folds them in
    return m.fail(ErrorCode::unsupported, "a cast to string of a value computed at run time (rlx has no string "
                  "dtype: strings are made at import, from constants and the inputs given to rlx run)");
  }
  RLX_ASSIGN_OR_RETURN(Tensor t, m.konst(0));
  StringTensor out;
  out.sizes = t.sizes();
  for (int64_t i = 0; i < t.numel(); ++i) {
    RLX_ASSIGN_OR_RETURN(std::string s, format_number(m, t, i));
    out.values.push_back(std::move(s));
  }
  return m.out_strings(0, std::move(out));
}

void register_string_ops(OpTable& t) {
  t["StringNormalizer"] = {map_string_normalizer, false};
}

}  // namespace rlx::onnx_import
