// The parser of the graph and primitive levels: a recursive-descent reader over the token
// list from lexer.cpp. Nodes are type-checked as they are read (the ops table's inference),
// so every error points at the line and column of the token or node at fault.
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "rlx/mapped_file.h"
#include "lexer.h"
#include "rlx/ir_text.h"
#include "rlx/verify.h"
#include "text_format.h"
#include "text_parse.h"

namespace rlx::text {
namespace {

std::string strip_op_prefix(const std::string& msg, Op op) {
  std::string prefix = cat(op_name(op), ": ");
  if (msg.compare(0, prefix.size(), prefix) == 0) return msg.substr(prefix.size());
  return msg;
}

std::string join_types(const std::vector<TensorType>& ts) {
  std::string r;
  for (size_t i = 0; i < ts.size(); ++i) r += concat(i ? ", " : "", format_type(ts[i]));
  return r;
}

class Parser : public TokenParser {
 public:
  Parser(std::vector<Token> toks, std::string_view source) : TokenParser(std::move(toks), source) {}

  Expected<Graph> run() {
    RLX_TRY(parse_header());
    RLX_TRY(parse_body());
    if (cur().kind != Tok::eof) return fail(cur(), "unexpected ", describe(cur()), " after the end of the graph");
    return std::move(g_);
  }

 private:
  // ---- graph ----

  Status define(const Token& name_tok, ValueId v) {
    auto [it, fresh] = defs_.emplace(name_tok.text, v);
    if (!fresh) {
      const Token& first = *def_tok_[it->second];
      return fail(name_tok, "redefinition of %", name_tok.text, " (first defined at ", first.line, ":", first.col, ")");
    }
    if (def_tok_.size() <= static_cast<size_t>(v)) def_tok_.resize(v + 1, nullptr);
    def_tok_[v] = &name_tok;
    g_.values[v].name = name_tok.text;
    return Status::ok();
  }

  Status parse_header() {
    const Token& kw = cur();
    if (at_ident("graph")) {
      g_.level = IrLevel::graph;
    } else if (at_ident("primitive")) {
      g_.level = IrLevel::primitive;
    } else {
      return fail(kw, "expected 'graph' or 'primitive' but found ", describe(kw));
    }
    take();
    if (!at(Tok::global_name)) return fail(cur(), "expected a graph name such as @main but found ", describe(cur()));
    g_.name = take().text;
    RLX_TRY(expect(Tok::lparen, "'(' to open the graph inputs"));
    if (!accept(Tok::rparen)) {
      for (;;) {
        if (!at(Tok::value_name)) return fail(cur(), "expected an input name such as %x but found ", describe(cur()));
        const Token& name_tok = take();
        RLX_TRY(expect(Tok::colon, "':' after the input name"));
        RLX_ASSIGN_OR_RETURN(TensorType ty, parse_type());
        if (defs_.count(name_tok.text))
          return define(name_tok, 0);  // reports the redefinition
        ValueId v = g_.add_input("", ty);
        RLX_TRY(define(name_tok, v));
        if (accept(Tok::rparen)) break;
        RLX_TRY(expect(Tok::comma, "',' or ')' after a graph input"));
      }
    }
    if (accept(Tok::arrow)) {
      RLX_TRY(expect(Tok::lparen, "'(' to open the result types"));
      std::vector<TensorType> outs;
      if (!accept(Tok::rparen)) {
        for (;;) {
          RLX_ASSIGN_OR_RETURN(TensorType ty, parse_type());
          outs.push_back(std::move(ty));
          if (accept(Tok::rparen)) break;
          RLX_TRY(expect(Tok::comma, "',' or ')' in the result types"));
        }
      }
      declared_outputs_ = std::move(outs);
    }
    return expect(Tok::lbrace, "'{' to open the graph body");
  }

  Status parse_body() {
    for (;;) {
      if (at_ident("return")) return parse_return();
      if (at(Tok::value_name)) {
        RLX_TRY(parse_statement());
        continue;
      }
      if (at(Tok::rbrace)) return fail(cur(), "missing 'return' before '}'");
      return fail(cur(), "expected a statement ('%name = op(...)' or 'return') but found ", describe(cur()));
    }
  }

  Status parse_return() {
    const Token& ret = take();
    std::vector<const Token*> toks;
    if (at(Tok::value_name)) {
      for (;;) {
        if (!at(Tok::value_name)) return fail(cur(), "expected a value name after ',' but found ", describe(cur()));
        const Token& t = take();
        auto it = defs_.find(t.text);
        if (it == defs_.end()) return fail(t, "use of undefined value %", t.text);
        g_.outputs.push_back(it->second);
        toks.push_back(&t);
        if (!accept(Tok::comma)) break;
      }
    }
    if (declared_outputs_) {
      const auto& want = *declared_outputs_;
      if (want.size() != g_.outputs.size())
        return fail(ret, "the graph returns ", g_.outputs.size(), " values but its signature declares ", want.size());
      for (size_t k = 0; k < want.size(); ++k)
        if (g_.type(g_.outputs[k]) != want[k])
          return fail(*toks[k], "returned value %", toks[k]->text, " has type ", format_type(g_.type(g_.outputs[k])),
                      " but the signature declares ", format_type(want[k]));
    }
    return expect(Tok::rbrace, "'}' after the return");
  }

  Status parse_statement() {
    std::vector<const Token*> names;
    for (;;) {
      if (!at(Tok::value_name)) return fail(cur(), "expected a value name but found ", describe(cur()));
      names.push_back(&take());
      if (!accept(Tok::comma)) break;
    }
    RLX_TRY(expect(Tok::equal, "'=' after the value names"));
    const Token* native_tok = nullptr;
    if (at_ident("native") && peek().kind == Tok::ident) native_tok = &take();
    const Token& op_tok = cur();
    if (op_tok.kind != Tok::ident) return fail(op_tok, "expected an op name but found ", describe(op_tok));
    auto op_opt = op_from_name(op_tok.text);
    if (!op_opt) return fail(op_tok, "unknown op '", op_tok.text, "'");
    const Op op = *op_opt;
    const OpInfo& info = op_info(op);
    take();

    std::vector<ValueId> inputs;
    Attrs attrs;
    std::optional<DenseLit> dense;
    std::string param_name;
    bool param_form = false;
    if (op == Op::Param && at(Tok::string)) {
      param_form = true;
      param_name = take().text;
    } else if (op == Op::Constant && at_ident("dense")) {
      RLX_ASSIGN_OR_RETURN(DenseLit d, parse_dense());
      dense = std::move(d);
    } else {
      RLX_TRY(expect(Tok::lparen, "'(' after the op name"));
      if (!accept(Tok::rparen)) {
        for (;;) {
          if (!at(Tok::value_name)) return fail(cur(), "expected an operand such as %x but found ", describe(cur()));
          const Token& t = take();
          auto it = defs_.find(t.text);
          if (it == defs_.end()) return fail(t, "use of undefined value %", t.text);
          inputs.push_back(it->second);
          if (accept(Tok::rparen)) break;
          RLX_TRY(expect(Tok::comma, "',' or ')' after an operand"));
        }
      }
      if (at(Tok::lbrace)) RLX_TRY(parse_attrs(op, attrs));
    }
    std::string loc;
    if (at_ident("loc")) {
      take();
      RLX_TRY(expect(Tok::lparen, "'(' after loc"));
      if (!at(Tok::string)) return fail(cur(), "expected a quoted node name in loc(...) but found ", describe(cur()));
      loc = take().text;
      RLX_TRY(expect(Tok::rparen, "')' to close loc(...)"));
    }
    std::vector<TensorType> declared;
    const Token* colon = nullptr;
    if (at(Tok::colon)) {
      colon = &take();
      for (;;) {
        RLX_ASSIGN_OR_RETURN(TensorType ty, parse_type());
        declared.push_back(std::move(ty));
        if (!accept(Tok::comma)) break;
      }
    }

    const std::string& first_name = names[0]->text;
    // The short forms: `param "name" : type` and `constant dense<...> [: type]`.
    if (param_form) {
      if (!colon) return fail(op_tok, "param \"", param_name, "\" needs its type: param \"name\" : f32[...]");
      if (declared.size() != 1) return fail(*colon, "param has one type, got ", declared.size());
    }
    if (dense) {
      std::optional<TensorType> ty = dense->type;
      if (colon && declared.size() != 1) return fail(*colon, "constant has one type, got ", declared.size());
      if (ty && colon && declared[0] != *ty)
        return fail(*colon, "%", first_name, " is declared ", format_type(declared[0]),
                    " but its dense literal is ", format_type(*ty));
      if (!ty && colon) ty = declared[0];
      if (!ty) return fail(op_tok, "constant needs a type: dense<f32[2], [...]> or constant dense<...> : f32[2]");
      RLX_ASSIGN_OR_RETURN(Tensor t, build_tensor(*dense, *ty));
      attrs.set("value", std::move(t));
    }
    if (!param_form) {
      const int n = static_cast<int>(inputs.size());
      if (n < info.min_inputs || (info.max_inputs >= 0 && n > info.max_inputs)) {
        std::string want = info.max_inputs < 0 ? cat("at least ", info.min_inputs)
                           : info.min_inputs == info.max_inputs ? cat(info.min_inputs)
                                                                : cat(info.min_inputs, " to ", info.max_inputs);
        return fail(op_tok, info.name, " takes ", want, " inputs, got ", n);
      }
      for (const AttrSpec& s : info.attrs)
        if (s.required && !attrs.has(s.name))
          return fail(op_tok, info.name, " needs attribute '", s.name, "'");
    }

    std::vector<TensorType> types;
    if (param_form) {
      types = declared;
    } else {
      std::vector<TensorType> in_types;
      for (ValueId v : inputs) in_types.push_back(g_.type(v));
      NodeSig sig{in_types, attrs, ""};
      auto inferred = infer_types(op, sig);
      if (!inferred)
        return fail_code(inferred.status().code(), op_tok, "cannot infer the type of %", first_name, " (",
                         info.name, "): ", strip_op_prefix(inferred.status().message(), op));
      if (colon) {
        if (declared.size() != inferred->size())
          return fail(*colon, info.name, " gives ", inferred->size(), " value(s) but ", declared.size(),
                      " type(s) are declared");
        if (!output_types_match(op, *inferred, declared))
          return fail(*colon, "%", first_name, " is declared ", join_types(declared), " but ", info.name,
                      " gives ", join_types(*inferred));
        types = declared;
      } else {
        types = std::move(*inferred);
      }
    }
    if (names.size() != types.size())
      return fail(*names[0], info.name, " gives ", types.size(), " value(s) but ", names.size(),
                  " name(s) are bound");
    for (size_t a = 0; a < names.size(); ++a) {
      if (defs_.count(names[a]->text)) return define(*names[a], 0);  // reports the redefinition
      for (size_t b = 0; b < a; ++b)
        if (names[b]->text == names[a]->text)
          return fail(*names[a], "%", names[a]->text, " is bound twice in one statement");
    }

    std::vector<ValueId> outs;
    if (param_form) {
      outs = {g_.add_param(param_name, types[0])};
      g_.nodes.back().name = loc;
    } else {
      outs = g_.add_node_typed(op, std::move(inputs), std::move(attrs), std::move(types), loc);
    }
    g_.nodes.back().native = native_tok != nullptr;
    for (size_t k = 0; k < outs.size(); ++k) RLX_TRY(define(*names[k], outs[k]));
    const int32_t node_index = static_cast<int32_t>(g_.nodes.size()) - 1;
    Status level = verify_node_level(g_, node_index);
    if (!level) {
      std::string msg = level.message();
      std::string label = g_.node_label(node_index) + ": ";
      if (msg.compare(0, label.size(), label) == 0) msg = msg.substr(label.size());
      return fail_code(level.code(), op_tok, "%", first_name, " (", info.name, ") at the primitive level: ", msg);
    }
    return Status::ok();
  }

  Graph g_;
  std::unordered_map<std::string, ValueId> defs_;
  std::vector<const Token*> def_tok_;
  std::optional<std::vector<TensorType>> declared_outputs_;
};

}  // namespace
}  // namespace rlx::text

namespace rlx {

Expected<Graph> parse_graph(std::string_view text, std::string_view source_name) {
  try {
    auto toks = text::lex(text, source_name);
    if (!toks) return std::move(toks).take_status();
    return text::Parser(std::move(toks).value(), source_name).run();
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::internal, source_name, ": out of memory while parsing");
  } catch (const std::exception& e) {
    return error(ErrorCode::internal, source_name, ": unexpected exception while parsing: ", e.what());
  }
}

Expected<Graph> parse_graph_file(const std::string& path) {
  // text IR of a million nodes is some tens of MiB
  RLX_ASSIGN_OR_RETURN(std::string data, read_regular_file(path, uint64_t{1} << 30));
  return parse_graph(data, path);
}

}  // namespace rlx
