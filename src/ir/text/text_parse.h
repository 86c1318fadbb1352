// Reading pieces of the text IR that every level's parser shares: a cursor over the token
// list with positioned errors, numbers, types, dense literals and attributes. The graph
// parser (parser.cpp) and the kernel parser (src/ir/kernel/kernel_text.cpp) both derive from
// TokenParser, so the same text means the same thing at every level.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "lexer.h"
#include "rlx/attrs.h"
#include "rlx/ops.h"
#include "rlx/shape.h"
#include "rlx/status.h"
#include "rlx/tensor.h"

namespace rlx::text {

// Lists inside dense<...> nest at most this deep, so hostile input cannot exhaust the stack.
constexpr int kMaxNesting = 64;
// A constant in text IR is small by nature (weights are params); this bounds what a short
// splat such as dense<0.0> : f32[100000, 100000] may allocate.
constexpr int64_t kMaxConstantBytes = int64_t{1} << 30;

// One element of a dense literal: a number token, or for c64 a (re, im) pair.
struct Element {
  const Token* re = nullptr;
  const Token* im = nullptr;
};

// A dense literal before its type is known (the constant form takes the type after ':').
struct DenseLit {
  const Token* start = nullptr;
  std::optional<TensorType> type;
  bool is_list = false;
  std::vector<int64_t> list_shape;
  std::vector<Element> elems;
};

class TokenParser {
 public:
  TokenParser(std::vector<Token> toks, std::string_view source) : toks_(std::move(toks)), source_(source) {}

 protected:
  // ---- tokens and errors ----

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  // The current token; advances unless it is the final eof token.
  const Token& take() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool at(Tok k) const { return cur().kind == k; }
  bool at_ident(std::string_view word) const { return cur().kind == Tok::ident && cur().text == word; }
  bool accept(Tok k) {
    if (!at(k)) return false;
    take();
    return true;
  }

  // An error with code `code` whose message starts "<source>:<line>:<col>: " of `t`.
  template <class... Args>
  Status fail_code(ErrorCode code, const Token& t, const Args&... args) {
    return error(code, source_, ":", t.line, ":", t.col, ": ", args...);
  }
  template <class... Args>
  Status fail(const Token& t, const Args&... args) {
    return fail_code(ErrorCode::parse_error, t, args...);
  }
  // Takes a token of kind `k`, or fails with "expected <what> but found <token>".
  Status expect(Tok k, std::string_view what);

  // ---- numbers ----

  // The i64 an integer token holds (range-checked).
  Expected<int64_t> int_of(const Token& t);
  // A float from a number token or inf / -inf / nan, read at the precision of T (float or
  // double) so that the shortest text the printer writes reads back as exactly that value.
  template <class T>
  Expected<T> float_of(const Token& t);
  bool at_number() const;

  // ---- types ----

  Expected<DType> parse_dtype_token();
  // dtype[dim, ...] (dims: sizes, identifiers, strings, '?').
  Expected<TensorType> parse_type();

  // ---- dense literals ----

  Status parse_element(DenseLit& d);
  // A '[' list of elements or lists; returns its nested shape ([] for a scalar element).
  Expected<std::vector<int64_t>> parse_list(DenseLit& d, int depth);
  // dense<[type ,] payload>, with the `dense` keyword current.
  Expected<DenseLit> parse_dense();
  Status store_element(Tensor& t, int64_t i, const Element& e);
  // The tensor of type `ty` a dense literal describes (splat, nested or flat list).
  Expected<Tensor> build_tensor(const DenseLit& d, const TensorType& ty);

  // ---- attributes ----

  static bool kind_accepted(AttrKind want, AttrKind got);
  Expected<AttrValue> parse_attr_value(AttrKind want);
  // {name = value, ...} with names and kinds checked against `op`'s row of the ops table.
  Status parse_attrs(Op op, Attrs& attrs);

  std::vector<Token> toks_;
  std::string_view source_;
  size_t pos_ = 0;
};

}  // namespace rlx::text
