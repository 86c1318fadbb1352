#include "losses.h"

namespace rlx::train {

ValueId cross_entropy_per_example(OpBuilder& o, ValueId logits, ValueId labels) {
  if (!o.ok()) return kNoValue;
  if (o.rank(logits) != 2 || o.rank(labels) != 1 || !is_float(o.dtype(logits)) || !is_int(o.dtype(labels)))
    return o.fail(error(ErrorCode::shape_error, "cross_entropy takes float logits [B, C] and integer labels [B], got ",
                        o.type(logits).to_string(), " and ", o.type(labels).to_string()));
  const Shape& s = o.shape(logits);
  if (!s[0].is_static() || !s[1].is_static())
    return o.fail(error(ErrorCode::shape_error, "cross_entropy needs static logits, got ", o.type(logits).to_string()));
  const int64_t b = s[0].size(), classes = s[1].size();
  ValueId lsm = o.log_softmax(logits, 1);
  ValueId cls = o.iota(o.dtype(labels), {b, classes}, 1);
  ValueId hit = o.op(Op::Equal, {cls, o.reshape(labels, {b, 1})});
  ValueId picked = o.where(hit, lsm, o.scalar_like(0.0, lsm));
  return o.neg(o.reduce_sum(picked, {1}, false));
}

ValueId cross_entropy(OpBuilder& o, ValueId logits, ValueId labels) {
  ValueId per = cross_entropy_per_example(o, logits, labels);
  if (!o.ok()) return kNoValue;
  return o.reduce_mean(per, {0}, false);
}

ValueId mse(OpBuilder& o, ValueId pred, ValueId target) {
  ValueId d = o.sub(pred, target);
  return o.reduce_mean(o.mul(d, d), {}, false);
}

}  // namespace rlx::train
