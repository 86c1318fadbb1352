// Printing pieces of the text IR that the parser's tests and other printers (the kernel level,
// dispatch reports) reuse: types, attribute values and tensor literals.
#pragma once

#include <string>

#include "rlx/attrs.h"
#include "rlx/shape.h"
#include "rlx/tensor.h"

namespace rlx::text {

// "f32[batch, 784]": dims print as integers, identifiers, `?`, or a quoted string for a
// symbol that is not an identifier.
std::string format_type(const TensorType& t);
// One attribute value as it appears after `name = `.
std::string format_attr_value(const AttrValue& v);
// The payload of a dense literal: a scalar when all elements are bitwise equal (a splat) or
// the tensor has rank 0, else a list nested by the shape. Elements print by dtype: integers,
// floats with '.' or 'e', `true`/`false`, and `(re, im)` for c64.
std::string format_dense_payload(const Tensor& t);

}  // namespace rlx::text
